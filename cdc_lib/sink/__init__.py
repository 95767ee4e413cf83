"""Delta Lake: storage, the Delta log, fences, key proofs, catalogs and change feeds, over two writer engines.

The shared modules here (`storage`, `delta_log`, `commits`, `choice`, `key_bounds`, `key_absence`, `loaded_tables`)
import neither engine; `spark/` and `delta_rs/` never import each other; the modules that choose between them or
act on a table whichever engine wrote it (`merge`, `fencing`, `catalog`, `change_feed`) sit above both;
`iceberg/` writes Iceberg metadata beside a Delta table's log, reading the log with delta-rs' reader only. The sink
knows nothing of MySQL.

May import: `common`, `model`, `config`, `changes` (and `cdc_lib.errors`) — never `source` or `binlog`."""
