-- What the hosted tool router keeps.
--
-- tool_router_sessions: a session a client searches within (id `trs_` and 32 hex digits, chosen
-- by the router), for one project and one user (NULL: a service caller's session), until
-- expires_at. Times are milliseconds since the epoch; expired sessions are deleted by expires_at.
CREATE TABLE IF NOT EXISTS tool_router_sessions (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL,
    user_id     TEXT,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS tool_router_sessions_by_expiry ON tool_router_sessions (expires_at);

-- integration_info: what a project's catalog says of one integration beside its tools, shown to
-- agents: a description and usage guidance (either may be empty), and known pitfalls of its tools
-- (a JSON object: tool name -> list of texts).
CREATE TABLE IF NOT EXISTS integration_info (
    project_id   TEXT NOT NULL,
    integration  TEXT NOT NULL,
    description  TEXT NOT NULL,
    guidance     TEXT NOT NULL,
    pitfalls     TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (project_id, integration)
);
