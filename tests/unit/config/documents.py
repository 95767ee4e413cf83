"""A valid config document: the config tests vary it one key at a time."""

from __future__ import annotations

from typing import Any

VALID: dict[str, Any] = {
    "pipeline": "shop",
    "source": {"host": "127.0.0.1", "port": 3306, "user": "cdc", "password": "pw", "server_id": 5701,
               "tables": ["shop.orders", "inventory.*"]},
    "sink": {"path": "/lake"},
}
