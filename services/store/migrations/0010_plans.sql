-- plans: what worked (or did not) for a use case in one project, recorded by the project's
-- services and recommended to searches whose use case is close to it. A plan's identity is its
-- project, its use case normalised (trimmed, lowercased, whitespace collapsed) and its steps: `id`
-- is `pln_` and a hash of the three, chosen by the router, so recording the same plan again
-- counts one more outcome instead of adding a row.
--
-- use_case: the text as last recorded; embedding: its vector (little-endian f32s) under the
-- router's model; steps: a JSON array of tool names, in order; pitfalls: a JSON array of texts;
-- successes and failures: outcomes recorded. Times are milliseconds since the epoch. Plans are
-- deleted with their tools (a plan naming a tool removed from the catalog goes with it).
CREATE TABLE IF NOT EXISTS plans (
    project_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    use_case    TEXT NOT NULL,
    embedding   BYTEA NOT NULL,
    steps       TEXT NOT NULL,
    notes       TEXT NOT NULL DEFAULT '',
    pitfalls    TEXT NOT NULL DEFAULT '[]',
    successes   BIGINT NOT NULL DEFAULT 0,
    failures    BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);
