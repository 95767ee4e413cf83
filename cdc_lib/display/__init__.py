"""What the CLI shows: reports and snapshot progress.

May import: `reconcile` and everything below it."""
