"""A hash mask's key is recorded with the landing rules as a check value: a new key under the same variable is told
apart, the key itself never is recorded, and a record of before the check is adopted rather than stopped."""

from __future__ import annotations

import copy
import json
from typing import Any

from cdc_lib.config.model import hash_key_check
from cdc_lib.config.parse import parse_config
from cdc_lib.pipeline.sync import _recorded_before_key_checks, _rekeyed_columns
from tests.unit.config.documents import VALID

KEY_ENV = "BINLAKE_UNIT_MASK_KEY"


def _sink() -> Any:
    document: dict[str, Any] = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"mask": {"note": {"hash": {"key_env": KEY_ENV}},
                                                           "sku": {"redact": None}}}}
    return parse_config(document).sink


def test_the_key_check_tells_keys_apart_and_holds_nothing_of_the_key() -> None:
    sink = _sink()
    first = sink.landing_rules_for("shop.orders", environ={KEY_ENV: "first-secret-key"})
    second = sink.landing_rules_for("shop.orders", environ={KEY_ENV: "second-secret-key"})
    assert first["mask"]["note"]["key_check"] == hash_key_check("first-secret-key")
    assert first["mask"]["note"]["key_check"] != second["mask"]["note"]["key_check"]
    assert len(first["mask"]["note"]["key_check"]) == 16 and "key_check" not in first["mask"]["sku"]
    assert "secret" not in json.dumps(first)
    assert _rekeyed_columns(first, second) == ["note"]
    # A difference beside the key is reported as such, not as a new key.
    widened = {**second, "exclude": ["qty"]}
    assert _rekeyed_columns(first, widened) == []
    # Unset: nothing recorded for the key (shaping the rows refuses the missing key with its own remedy).
    assert "key_check" not in sink.landing_rules_for("shop.orders", environ={})["mask"]["note"]


def test_a_record_of_before_key_checks_is_adopted_not_stopped() -> None:
    current = _sink().landing_rules_for("shop.orders", environ={KEY_ENV: "k"})
    old = {**current, "mask": {column: {key: value for key, value in mask.items() if key != "key_check"}
                               for column, mask in current["mask"].items()}}
    assert _recorded_before_key_checks(old, current)
    assert not _recorded_before_key_checks(current, current)  # equal: nothing to adopt
    assert not _recorded_before_key_checks({**old, "filter": "qty > 1"}, current)  # another change: a stop
    other_key = _sink().landing_rules_for("shop.orders", environ={KEY_ENV: "other"})
    assert not _recorded_before_key_checks(other_key, current)
