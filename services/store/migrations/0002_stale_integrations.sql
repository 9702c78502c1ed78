-- Integrations that may still hold a copy of a tool that moved or is being deleted (comma
-- separated slugs); empty once a write has completed.
ALTER TABLE tools ADD COLUMN stale_integrations TEXT NOT NULL DEFAULT '';
