"""A valid pipeline config document, which the config tests (and others that need a config) change a key of."""

from typing import Any

VALID: dict[str, Any] = {
    "pipeline": "shop",
    "source": {"host": "127.0.0.1", "port": 3306, "user": "cdc", "password": "pw", "server_id": 5701,
               "tables": ["shop.orders", "inventory.*"]},
    "sink": {"path": "/lake"},
}
