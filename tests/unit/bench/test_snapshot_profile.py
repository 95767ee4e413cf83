"""The snapshot benches' wrapping: the profile's step clock over the engine as it is now, the variants' write hook."""

from __future__ import annotations

import types
from typing import Any

import pytest

from bench.snapshot.snapshot_profile import StepClock, _engine_steps
from bench.snapshot.snapshot_variants import VARIANTS, _writing


def test_the_profile_wraps_the_engine_as_it_is_and_puts_it_back() -> None:
    # A step that moved out of a module (the profile named `spark_writer.table_exists` after it had gone) must not
    # stop the whole profile before its first snapshot.
    steps = _engine_steps()
    before = [getattr(owner, attribute, None) for owner, attribute, _ in steps]
    with StepClock().patched(steps):
        wrapped = [getattr(owner, attribute, None) for owner, attribute, _ in steps]
    assert [getattr(owner, attribute, None) for owner, attribute, _ in steps] == before
    assert any(now is not then for now, then in zip(wrapped, before, strict=True))


def test_a_second_is_charged_to_the_innermost_step() -> None:
    ticks = iter([0.0, 1.0, 3.0, 10.0])
    clock = StepClock()
    owner = types.SimpleNamespace(inner=lambda: None)
    owner.outer = lambda: owner.inner()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bench.snapshot.snapshot_profile.time.perf_counter", lambda: next(ticks))
        with clock.patched([(owner, "outer", "outer"), (owner, "inner", "inner")]):
            owner.outer()
    assert clock.seconds == {"inner": 2.0, "outer": 8.0}


def test_a_variant_hands_delta_rs_its_settings_and_sets_properties_only_at_creation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import deltalake
    import pyarrow as pa

    calls: list[dict[str, Any]] = []

    def recorder(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", recorder)
    spent: list[float] = []
    with _writing(VARIANTS["lz4+key-stats"], spent):
        deltalake.write_deltalake("t", pa.table({}), configuration={"delta.enableDeletionVectors": "false"})
        deltalake.write_deltalake("t", pa.table({}), mode="append")
    created, appended = calls
    assert created["writer_properties"].compression == "LZ4_RAW"
    assert created["configuration"] == {"delta.enableDeletionVectors": "false",
                                        "delta.dataSkippingNumIndexedCols": "1"}
    assert "configuration" not in appended  # an existing table keeps what its creation set
    assert len(spent) == 2
    assert deltalake.write_deltalake is recorder  # the hook is gone again
