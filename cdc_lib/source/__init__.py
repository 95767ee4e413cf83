"""The source server: connecting to MySQL/MariaDB, its checks, binlog status and errors, table discovery, key
ranges, binlog history and how a silent connection is told from a closed one.

May import: `common`, `model`, `config` (and `cdc_lib.errors`)."""
