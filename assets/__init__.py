"""Dagster assets and asset checks built from a binlake pipeline config (see `orchestration.definitions`)."""
