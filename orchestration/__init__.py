"""Dagster definitions for binlake: resources, jobs, schedules and sensors around `cdc_lib`.

`workspace.yaml` loads `orchestration.definitions`, whose `defs` builds one
`Definitions` from the pipeline config named by `$BINLAKE_CONFIG`.
"""
