-- Membership changes. A move takes one replica of an integration or sync from one shard to
-- another: the new replica joins (added_at), is filled by the repair, then the old one leaves
-- (removed_at) and its copy is deleted. One move per key at a time.
CREATE TABLE IF NOT EXISTS replica_moves (
    project_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    key         TEXT NOT NULL,
    from_shard  TEXT NOT NULL,
    to_shard    TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    added_at    BIGINT,
    removed_at  BIGINT,
    PRIMARY KEY (project_id, kind, key)
);

-- Shards being emptied before removal; lost = 1 when their data is declared gone.
CREATE TABLE IF NOT EXISTS shard_drains (
    shard_id      TEXT PRIMARY KEY,
    lost          BIGINT NOT NULL,
    requested_at  BIGINT NOT NULL
);

-- Keys whose only replica was lost: their content has to be written again.
CREATE TABLE IF NOT EXISTS lost_replicas (
    project_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    key         TEXT NOT NULL,
    shard_id    TEXT NOT NULL,
    lost_at     BIGINT NOT NULL,
    PRIMARY KEY (project_id, kind, key)
);
