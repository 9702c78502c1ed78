-- Metadata fields a sync declares for its records: a JSON array of {"name", "kind"}, fixed when
-- the sync is created. Syncs created before declare none.
ALTER TABLE syncs ADD COLUMN fields TEXT NOT NULL DEFAULT '[]';
