"""Dagster definitions for binlake: jobs, schedules and sensors around the assets, assembled per pipeline.

`workspace.yaml` loads `orchestration.definitions`, whose `defs` builds one
`Definitions` from the pipeline config named by `$BINLAKE_CONFIG`.
"""
