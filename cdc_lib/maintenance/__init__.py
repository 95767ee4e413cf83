"""Table maintenance beside the sync: compaction, VACUUM, checkpoints and log cleanup, binlake's own leftovers.

Acts on the Delta tables through `sink/` (the log, the engines, the change-feed cursors) and on the offset store
through `state/` (abandoned snapshot documents, each table's last maintenance); the CLI calls it
(docs/production.md "Maintenance").

May import: `sink`, `state` and what they may import."""
