"""Telling a silent binlog connection from a closed one, so that a read never waits forever.

A network that stops answering without closing the connection (a NAT or load balancer that forgot the
flow, a paused VM, a half-open connection after a failover) leaves a socket read waiting for ever unless
it has a bound. The binlog reader's connections get `source.network_timeout_seconds` as their read and
write timeout (`source.connection_settings`) and ask the server for heartbeat events at half of it
(MASTER_HEARTBEAT_PERIOD), so a live server that has nothing to send is never mistaken for a silent one.

python-mysql-replication treats a lost connection (2013 / 2006) by reconnecting on its own and going on
from the last event it saw, inside a transaction if need be, and from the dump's *first* GTID state in
MariaDB GTID mode (which would read transactions twice). A timeout arrives as the same 2013, so the
connections here turn it into `StreamSilent`, which the library does not catch: the read ends, and
`binlog.read_batch` reads the batch again from its start (a transaction boundary) on new connections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql

from cdc_lib.source import timed_out


class StreamSilent(Exception):  # noqa: N818 - a signal to binlog.read_batch, which raises SilentConnectionError
    """A connection of the binlog reader saw no byte for its read bound (or could not send for its write bound)."""

    def __init__(self, seconds: float | None) -> None:
        super().__init__(f"no answer within {seconds}s")
        self.seconds = seconds


def heartbeat_period(network_timeout_seconds: float) -> float:
    """How often the server is asked to send a heartbeat when it has nothing else to send: twice per bound,
    so one lost heartbeat does not end a healthy read."""
    return network_timeout_seconds / 2


def silence_detecting(connect: Callable[..., Any]) -> Callable[..., Any]:
    """A connection factory whose connections raise `StreamSilent` where pymysql would report a timeout as a
    lost connection."""

    def connect_bounded(**settings: Any) -> Any:
        connection = connect(**settings)
        read_bytes, write_bytes = connection._read_bytes, connection._write_bytes

        def bounded_read(count: int) -> Any:
            try:
                return read_bytes(count)
            except pymysql.MySQLError as exc:
                if timed_out(exc):
                    raise StreamSilent(settings.get("read_timeout")) from None
                raise

        def bounded_write(data: bytes) -> Any:
            try:
                return write_bytes(data)
            except pymysql.MySQLError as exc:
                if timed_out(exc):
                    raise StreamSilent(settings.get("write_timeout")) from None
                raise

        # Instance attributes: pymysql calls `self._read_bytes(...)`, so these take over for this connection only.
        connection._read_bytes = bounded_read
        connection._write_bytes = bounded_write
        return connection

    return connect_bounded


__all__ = ["StreamSilent", "heartbeat_period", "silence_detecting"]
