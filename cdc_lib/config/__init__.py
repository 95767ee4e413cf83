"""A pipeline's configuration: the typed model, loading and parsing YAML, and deployments of several pipelines.

May import: `common`, `model` (and `cdc_lib.errors`)."""
