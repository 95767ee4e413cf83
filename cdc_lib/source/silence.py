"""Telling a silent binlog connection from a closed one, so that a read never waits forever.

A network that stops answering without closing the connection (a NAT or load balancer that forgot the
flow, a paused VM, a half-open connection after a failover) leaves a socket read waiting for ever unless
it has a bound. The binlog reader's connections get `source.network_timeout_seconds` as their read and
write timeout (`source.connection_settings`) and ask the server for heartbeat events at half of it
(MASTER_HEARTBEAT_PERIOD), so a live server that has nothing to send is never mistaken for a silent one.

python-mysql-replication treats a lost connection (2013 / 2006) by reconnecting on its own and going on
from the last event it saw, inside a transaction if need be, and from the dump's *first* GTID state in
MariaDB GTID mode (which would read transactions twice). A timeout arrives as the same 2013, so the
connections here turn it into `StreamSilent`, which the library does not catch: the read ends, the silent
session is ended on the server (`end_silent_session`), and `binlog.read_batch` reads the batch again from
its start (a transaction boundary) on new connections.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pymysql

from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import SilentConnectionError
from cdc_lib.source.server import SILENT_REMEDY, query, source_connection, timed_out

log = logging.getLogger("binlake")


class StreamSilent(SilentConnectionError):  # noqa: N818 - named for what `binlog.read_batch` catches
    """A connection of the binlog reader saw no byte for its read bound (or could not send for its write bound).

    Not a pymysql error, so the library lets it through; a `SilentConnectionError`, so a reader that does
    not read again (a probe, a snapshot's window scan) ends with the cause and the remedy.
    """

    def __init__(self, seconds: float | None, thread_id: int | None, *, server: str) -> None:
        super().__init__(
            f"the binlog connection to {server} did not answer within {seconds}s (source.network_timeout_seconds)",
            remedy=SILENT_REMEDY,
        )
        self.seconds = seconds
        #: The server's id of the silent connection's session (its handshake said), to end it there.
        self.thread_id = thread_id


def end_silent_session(source: SourceConfig, silent: StreamSilent) -> None:
    """End the silent connection's session on the server, over a new connection, before the batch is read again.

    The server's side of a silent dump may be blocked writing to it (the network took the bytes and went
    quiet) and stays so until its `net_write_timeout` (60 s by default); a new dump with the same server_id
    then waits for it to go (MariaDB), so reading again at once would find the new stream silent too.
    `KILL CONNECTION` interrupts the blocked write; a user may end its own sessions without any privilege.

    Raises:
        SilentConnectionError, SourceConnectionError: the server cannot be reached on a new connection either.
    """
    if silent.thread_id is None:
        return
    with source_connection(source) as connection:
        try:
            query(connection, "KILL CONNECTION %s", (silent.thread_id,))
        except pymysql.MySQLError as exc:  # gone already (1094), or not ours to end: the read goes on either way
            log.info("could not end the silent binlog session %s on the server (%s)", silent.thread_id, exc)


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
        server_thread = getattr(connection, "server_thread_id", None)
        thread_id = int(server_thread[0]) if server_thread else None
        server = f"{settings.get('host')}:{settings.get('port')}"

        def bounded(call: Callable[[Any], Any], timeout_setting: str) -> Callable[[Any], Any]:
            def wait(argument: Any) -> Any:
                try:
                    return call(argument)
                except pymysql.MySQLError as exc:
                    if timed_out(exc):
                        raise StreamSilent(settings.get(timeout_setting), thread_id, server=server) from None
                    raise

            return wait

        # Instance attributes: pymysql calls `self._read_bytes(...)`, so these take over for this connection only.
        connection._read_bytes = bounded(read_bytes, "read_timeout")
        connection._write_bytes = bounded(write_bytes, "write_timeout")
        return connection

    return connect_bounded


__all__ = ["StreamSilent", "end_silent_session", "heartbeat_period", "silence_detecting"]
