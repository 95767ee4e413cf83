"""Between read and write: a batch's row changes folded per key, the table modes' pure rules, column projection
and masks, spilling big batches to local Parquet.

May import: `common`, `model`, `config` (and `cdc_lib.errors`)."""
