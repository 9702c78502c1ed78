-- Context search (synced content). A sync is one connected source of one owner, delivering
-- records into the shards named by shard_ids (comma separated, primary first). generation is
-- bumped by every write of its records; records and segments are totals over sync_records.
CREATE TABLE IF NOT EXISTS syncs (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects(id),
    source          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    shard_ids       TEXT NOT NULL,
    generation      BIGINT NOT NULL DEFAULT 0,
    records         BIGINT NOT NULL DEFAULT 0,
    segments        BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL,
    last_ingest_at  BIGINT
);

CREATE INDEX IF NOT EXISTS syncs_by_project ON syncs (project_id);

-- What the store knows of each record of a sync: the generation and content hash of its last
-- write (the hash is empty while a write is pending) and how many segments it was cut into.
CREATE TABLE IF NOT EXISTS sync_records (
    sync_id       TEXT NOT NULL REFERENCES syncs(id),
    record_id     TEXT NOT NULL,
    generation    BIGINT NOT NULL,
    content_hash  TEXT NOT NULL,
    segments      BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (sync_id, record_id)
);

-- A record's ACL as principal tokens: `user:a@b.com`, `group:eng`, `domain:b.com`, `anyone`.
CREATE TABLE IF NOT EXISTS record_principals (
    sync_id    TEXT NOT NULL,
    record_id  TEXT NOT NULL,
    principal  TEXT NOT NULL,
    PRIMARY KEY (sync_id, record_id, principal)
);

CREATE INDEX IF NOT EXISTS record_principals_by_principal ON record_principals (sync_id, principal);

-- Members of the source's groups. Per sync, since group ids are the source's.
CREATE TABLE IF NOT EXISTS sync_group_members (
    sync_id   TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    member    TEXT NOT NULL,
    PRIMARY KEY (sync_id, group_id, member)
);

CREATE INDEX IF NOT EXISTS sync_group_members_by_member ON sync_group_members (sync_id, member);
