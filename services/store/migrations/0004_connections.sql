-- User connections: one account of one user on one integration (e.g. two Gmail accounts of
-- alice). status (`active`, `inactive`, `expired`, `revoked`, `error`) and account_type
-- (`private`, `shared`) are validated by the router and stored as given; user_info is JSON text.
-- The store keeps at most one default account per user and integration (and one whenever the
-- integration has accounts).
CREATE TABLE IF NOT EXISTS connections (
    project_id     TEXT NOT NULL REFERENCES projects(id),
    user_id        TEXT NOT NULL,
    integration    TEXT NOT NULL,
    account_id     TEXT NOT NULL,
    alias          TEXT,
    status         TEXT NOT NULL,
    account_type   TEXT NOT NULL,
    is_default     BOOLEAN NOT NULL DEFAULT FALSE,
    user_info      TEXT,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (project_id, user_id, integration, account_id)
);

CREATE INDEX IF NOT EXISTS connections_by_user ON connections (project_id, user_id);

CREATE UNIQUE INDEX IF NOT EXISTS connections_one_default
    ON connections (project_id, user_id, integration) WHERE is_default;
