"""Writing several tables' shares of a batch to Delta at once, each in its own idempotent commit.

A binlake commit is made idempotent by SQL confs of the Spark session that runs it (`commit.IdempotentCommit`:
the SetTransaction's app id and version, the commit's user metadata). A session's confs are shared by every
thread that uses it, so two tables written at once from one session would stamp each other's commits. Each
writer thread therefore works in a session of its own: a clone of the pipeline's session (same SparkContext and
settings, its own SQL conf), made the thread's active session, since Delta reads some confs from the active one.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Job = TypeVar("Job")
Session = TypeVar("Session")
Outcome = TypeVar("Outcome")


def isolated_session(spark: SparkSession) -> SparkSession:
    """A session on the same SparkContext with a copy of `spark`'s SQL conf that it does not share.

    `cloneSession` (not `newSession`) so that confs set on the running session after it was built (e.g. by a
    second pipeline in the same process) come along.
    """
    return type(spark)(spark.sparkContext, spark._jsparkSession.cloneSession())


def _activate(session: SparkSession) -> None:
    jvm = session.sparkContext._jvm
    assert jvm is not None
    type(session)._get_j_spark_session_class(jvm).setActiveSession(session._jsparkSession)


def apply_all(
    spark: SparkSession,
    jobs: Sequence[Job],
    write: Callable[[SparkSession, Job], Outcome],
    *,
    threads: int,
) -> list[Outcome | BaseException]:
    """`write(session, job)` for every job, `threads` at a time; outcomes (or what each raised) in job order.

    With one thread every job runs here, in `spark` itself. Otherwise each thread takes a session of its own
    from a pool of `threads` clones, so concurrent commits never see each other's confs. Every job runs to its
    end before this returns, whatever the others raised: a failed table must not hide what the others committed.
    """
    if threads <= 1 or len(jobs) <= 1:
        return [_attempt(write, spark, job) for job in jobs]
    sessions: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
    for _ in range(threads):
        sessions.put(isolated_session(spark))

    def run(job: Job) -> Outcome | BaseException:
        session = sessions.get()
        try:
            _activate(session)
            return _attempt(write, session, job)
        finally:
            sessions.put(session)

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="binlake-apply") as executor:
        return list(executor.map(run, jobs))


def run_all(
    jobs: Sequence[Job], write: Callable[[None, Job], Outcome], *, threads: int
) -> list[Outcome | BaseException]:
    """`write(None, job)` for every job, `threads` at a time on plain threads (writers that need no Spark session,
    e.g. delta-rs, which releases the GIL while it merges); outcomes (or what each raised) in job order."""
    if threads <= 1 or len(jobs) <= 1:
        return [_attempt(write, None, job) for job in jobs]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="binlake-apply") as executor:
        return list(executor.map(lambda job: _attempt(write, None, job), jobs))


def _attempt(
    write: Callable[[Session, Job], Outcome], session: Session, job: Job
) -> Outcome | BaseException:
    try:
        return write(session, job)
    except BaseException as exc:  # noqa: BLE001 - handed back to the caller, which re-raises after settling
        return exc


__all__ = ["apply_all", "isolated_session", "run_all"]
