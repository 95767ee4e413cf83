"""The shared vocabulary below every stage: binlog positions, MySQL column types and charsets, table names and
schemas.

May import: `common` (and `cdc_lib.errors`)."""
