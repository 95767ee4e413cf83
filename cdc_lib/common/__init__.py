"""Leaf plumbing every stage uses: failpoints, logging, S3 settings, stored-format versions, failure classes.

May import: nothing of binlake but `cdc_lib.errors`."""
