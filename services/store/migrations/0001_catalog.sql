-- Projects, the placement of each integration's index on shards, and the catalog ledger (which
-- tool names a project holds, in which integration, with which content hash).
CREATE TABLE IF NOT EXISTS projects (
    id          TEXT PRIMARY KEY,
    created_at  BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS placements (
    project_id   TEXT NOT NULL REFERENCES projects(id),
    integration  TEXT NOT NULL,
    shard_id     TEXT NOT NULL,
    replica      INTEGER NOT NULL,
    PRIMARY KEY (project_id, integration, shard_id)
);

CREATE TABLE IF NOT EXISTS tools (
    project_id    TEXT NOT NULL REFERENCES projects(id),
    name          TEXT NOT NULL,
    integration   TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE INDEX IF NOT EXISTS tools_by_integration ON tools (project_id, integration);
