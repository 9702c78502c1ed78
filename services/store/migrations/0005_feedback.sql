-- Feedback on searches and the ranking models refit from it.
--
-- feedback: what a caller used from one search (its request id), with the candidate lists that
-- search saw, as one JSON document (`example`); kind is `tools` or `context`. A second feedback
-- for the same request id replaces the first. The router keeps a bounded number per project.
CREATE TABLE IF NOT EXISTS feedback (
    project_id     TEXT NOT NULL REFERENCES projects(id),
    kind           TEXT NOT NULL,
    request_id     TEXT NOT NULL,
    example        TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (project_id, kind, request_id)
);

CREATE INDEX IF NOT EXISTS feedback_newest ON feedback (project_id, kind, created_at_ms);

-- ranking_models: versions 1, 2, ... per project and kind; params is JSON.
CREATE TABLE IF NOT EXISTS ranking_models (
    project_id     TEXT NOT NULL REFERENCES projects(id),
    kind           TEXT NOT NULL,
    version        BIGINT NOT NULL,
    params         TEXT NOT NULL,
    examples       BIGINT NOT NULL,
    created_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (project_id, kind, version)
);
