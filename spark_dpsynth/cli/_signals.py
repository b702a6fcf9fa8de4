"""The JVM of a local session under SIGINT and SIGTERM: one line from us, nothing from the JVM (docs/design.md
section 1.6).

A local classic session's JVM is a child of this process, in its process group: Ctrl-C in a terminal, ``timeout``
and a scheduler's kill signal the whole group, the JVM included. Left alone, the JVM runs its shutdown hooks on
SIGTERM (stopping the SparkContext under the running job, so that the Python side fails with whatever py4j reads
next), and on its way down after this process exits it prints the stack traces of the tasks it rejects. So, while
the session starts (:func:`launched_jvm`):

* the JVM inherits SIGINT and SIGTERM ignored (an inherited SIG_IGN stays ignored: the JVM installs no shutdown
  handler for it); this process handles both, cancels the Spark jobs and exits, and the JVM ends when its stdin,
  a pipe from this process, closes;
* the JVM's stderr (and its Python workers', which inherit it) is a pipe that a thread of this process copies to
  its own stderr until a SIGINT or SIGTERM arrives (:func:`mute_jvm`), seen through the signal wakeup fd the
  moment it is delivered, before any Python handler runs; after this process exits nothing the JVM writes
  reaches the terminal. Without ``--debug`` the copy leaves out the Java launcher's start-up warning
  (:data:`~spark_dpsynth.data.jvm_stderr.LAUNCHER_BANNER`, :mod:`spark_dpsynth.data.jvm_stderr`); the log4j2
  configuration of
  :mod:`spark_dpsynth.data.session` silences the rest of the start-up banner.

A session that already exists, a Spark Connect session and spark-submit's own JVM (the driver is then the JVM's
child, not its parent) are left as they are.

The command's side (:func:`install_interrupts`): SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated`
in the main thread after cancelling the session's Spark jobs (an exception Python loses in a finalizer is kept in
:data:`PENDING` and raised again, not printed); :func:`interrupted` prints the one line and removes
the run's staging (a pipeline's drawn release is kept, docs/design.md section 1.7).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from spark_dpsynth.data.io import local_path
from spark_dpsynth.data.jvm_stderr import LAUNCHER_BANNER, mute_jvm, piped_jvm_launch

if TYPE_CHECKING:
    from spark_dpsynth.data.publish import OutputStage

__all__ = [
    "LAUNCHER_BANNER",
    "PENDING",
    "Terminated",
    "check_interrupts",
    "install_interrupts",
    "interrupted",
    "interrupted_by_pending",
    "launched_jvm",
    "mute_jvm",
    "stop_jvm",
]

_STOPS = (signal.SIGINT, signal.SIGTERM)
_LAUNCHED: list[subprocess.Popen] = []
"""The JVM processes :func:`launched_jvm` saw start."""


def stop_jvm(seconds: float = 15.0) -> bool:
    """End the JVMs :func:`launched_jvm` started and wait for them (at most ``seconds`` each): PySpark's gateway
    exits when its stdin closes, and with it whatever it was still doing (a cancelled write's commit). True when
    none is left running (also when none was started here)."""
    if not _LAUNCHED:
        return True
    _stop_accumulator_server()
    done = True
    for proc in _LAUNCHED:
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            done = False
    return done


def _stop_accumulator_server() -> None:
    """Shut PySpark's accumulator server down before its JVM goes: its connection handler polls the shutdown flag
    once a second, and one that reads the end of the JVM's connection first prints an EOFError traceback."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    server = getattr(context, "_accumulatorServer", None)
    if server is None:
        return
    with contextlib.suppress(Exception):
        server.shutdown()
        time.sleep(1.2)


@contextlib.contextmanager
def launched_jvm(*, debug: bool = False) -> Iterator[None]:
    """Start a session inside this block: a JVM that PySpark launches in it ignores SIGINT and SIGTERM and writes
    its stderr through this process (module docstring), without the launcher's banner unless ``debug``.
    Outside the main thread this changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ignore_stops() -> None:
        for stop in _STOPS:
            signal.signal(stop, signal.SIG_IGN)

    launched: list[subprocess.Popen] = []
    try:
        with piped_jvm_launch(
            debug=debug, preexec=ignore_stops, wakeup=_wakeup_fd, stops=tuple(int(s) for s in _STOPS)
        ) as launched:
            yield
    finally:
        _LAUNCHED.extend(launched)


def _wakeup_fd() -> int | None:
    """A pipe on which Python writes the number of every signal it receives, the moment it arrives (None when
    another wakeup fd is in use: then only :func:`mute_jvm` mutes)."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    try:
        previous = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - only the main thread calls this
        previous = None
    if previous != -1:
        # Someone else's wakeup fd (e.g. an event loop's), or none could be set: keep theirs, rely on mute_jvm.
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(wake_read)
        os.close(wake_write)
        return None
    return wake_read


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler (a BaseException, like KeyboardInterrupt)."""


PENDING: list[type[BaseException]] = []
"""The interrupts received (KeyboardInterrupt, Terminated), in order. A signal handler's exception is lost when
the signal lands while Python runs a finalizer or a weak-reference callback (py4j releases its Java objects in
those: Python prints "Exception ignored in" and goes on), so the job checks this list between its steps and
before it publishes (:func:`check_interrupts`)."""


def check_interrupts() -> None:
    """Raise the first interrupt received whose exception was lost (see :data:`PENDING`)."""
    if PENDING:
        raise PENDING[0]


def interrupted_by_pending(stage: OutputStage | None, kept: str | None = None) -> int | None:
    """The exit status of an interrupt received before a failure, else None: a signal that stops the job also
    breaks what runs under it (the JVM's connection, a cancelled Spark job, the staging cleanup), and the error
    that follows is its consequence, reported as the interrupt (130 or 143), not as a failure of its own."""
    if not PENDING:
        return None
    if PENDING[0] is KeyboardInterrupt:
        return interrupted("SIGINT", 130, stage, kept)
    return interrupted("SIGTERM", 143, stage, kept)


def install_interrupts(spark=None) -> None:  # noqa: ANN001
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated` in the main thread; with a session,
    its running Spark jobs are cancelled first (so that no task still writes into the staging directory)."""
    if threading.current_thread() is not threading.main_thread():
        return
    PENDING.clear()
    from spark_dpsynth.data.session import is_connect

    connect = spark is not None and is_connect(spark)

    def cancel() -> None:
        if spark is None:
            return
        try:
            if connect:
                spark.interruptAll()
            else:
                spark.sparkContext.cancelAllJobs()
                wait_for_cancelled_tasks(spark)
        except Exception:  # noqa: BLE001 - best effort: the process exits next
            pass

    def on_sigint(signum, frame) -> None:  # noqa: ANN001
        PENDING.append(KeyboardInterrupt)
        mute_jvm()
        cancel()
        raise KeyboardInterrupt

    def on_sigterm(signum, frame) -> None:  # noqa: ANN001
        PENDING.append(Terminated)
        mute_jvm()
        cancel()
        raise Terminated

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)
    if not getattr(sys.unraisablehook, "keeps_lost_interrupts_quiet", False):
        sys.unraisablehook = _quiet_lost_interrupts(sys.unraisablehook)


def _quiet_lost_interrupts(previous):  # noqa: ANN001, ANN202 - sys.unraisablehook's own signature
    """``previous`` (the hook Python calls with an exception it cannot raise, e.g. one a finalizer or a
    weak-reference callback raised), except that an interrupt it lost is not printed: it is in :data:`PENDING`
    and :func:`check_interrupts` raises it again, so the one line of :func:`interrupted` stays the only one."""

    def hook(unraisable) -> None:  # noqa: ANN001 - sys.UnraisableHookArgs
        lost = unraisable.exc_type is not None and issubclass(
            unraisable.exc_type, (KeyboardInterrupt, Terminated)
        )
        if lost and PENDING:
            return
        previous(unraisable)

    hook.keeps_lost_interrupts_quiet = True  # type: ignore[attr-defined]
    return hook


_CANCEL_WAIT_SECONDS = 10.0
"""How long an interrupt waits for the cancelled tasks to stop before the staging is removed."""


def wait_for_cancelled_tasks(spark) -> None:  # noqa: ANN001 - classic SparkSession
    """Wait (at most :data:`_CANCEL_WAIT_SECONDS`) until no task runs: a cancelled job's tasks stop at their next
    record, and one still writing into the staging directory after it was removed would leave a directory behind
    (the JVM outlives the interrupt now that it ignores SIGINT and SIGTERM, :mod:`spark_dpsynth.cli._signals`)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + _CANCEL_WAIT_SECONDS
    while time.monotonic() < deadline:
        if sum(info.numRunningTasks() for info in tracker.getExecutorInfos()) == 0:
            return
        time.sleep(0.1)


def interrupted(name: str, status: int, stage: OutputStage | None, kept: str | None = None) -> int:
    """One line for an interrupt; further interrupts are ignored while the process ends, and so is the JVM's
    stderr (its cancelled tasks' stack traces, :mod:`spark_dpsynth.cli._signals`). Nothing published, or only a
    pipeline's release: the JVM this process started is ended first (a cancelled write may still commit into the
    removed staging directory) and what it left of the staging is removed. ``kept``: a pipeline's outputs kept
    after its release was drawn and how to resume (:func:`spark_dpsynth.cli.main.resume_hint`)."""
    mute_jvm()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    published = bool(stage and (stage.published or stage.published_tables))
    # A staging the stage keeps on purpose holds the journal of a rollback that a later run finishes. After a
    # pipeline's release was published (``kept``), the staging holds only the outputs not yet published.
    unpublished = not published or kept is not None
    if stage is not None and unpublished and not getattr(stage, "_keep_staging", False) and stop_jvm():
        shutil.rmtree(local_path(stage.staging_dir), ignore_errors=True)
    done = "the outputs were already published" if published else "no output was changed"
    if published and kept is not None:
        done = kept
    print(f"spark-dpsynth: interrupted by {name}; {done}", file=sys.stderr)
    return status
