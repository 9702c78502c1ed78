-- Replicas that missed a write (kind 'integration' or 'sync', key its name or id): not read from
-- until repaired from a healthy replica. epoch grows with every write a replica misses, so a
-- repair clears the mark only if no write was missed while it ran.
CREATE TABLE IF NOT EXISTS stale_replicas (
    project_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    key         TEXT NOT NULL,
    shard_id    TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    marked_at   BIGINT NOT NULL,
    PRIMARY KEY (project_id, kind, key, shard_id)
);
