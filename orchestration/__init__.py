"""Dagster definitions for binlake: jobs, schedules and sensors around the assets, assembled per pipeline.

Two ways in, one builder (`orchestration.definitions.build_definitions`): the `BinlakeComponent` of
`orchestration.component`, one `defs.yaml` per pipeline in a `dg` project; and `workspace.yaml`, which loads
`orchestration.definitions`, whose `defs` builds one `Definitions` from the pipelines `$BINLAKE_CONFIG` names.
"""
