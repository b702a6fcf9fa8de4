"""The stderr of a JVM that PySpark launches here, copied through this process (docs/design.md section 1.6).

Spark starts every JVM with ``--add-modules=jdk.incubator.vector``, and the Java launcher then writes "WARNING:
Using incubator modules: jdk.incubator.vector" on its stderr before the JVM runs any code: no Java option or log4j2
setting silences it. So a session started here (:func:`piped_jvm_launch`, used by :func:`~spark_dpsynth.data.
session.get_session` and by the command line) gives the JVM a pipe as its stderr, and a daemon thread copies the
pipe to this process's stderr, leaving out those launcher lines (:data:`LAUNCHER_BANNER`) at the start of the
stream unless ``debug``. The JVM's Python workers inherit the same pipe. Everything else the JVM writes (its
log4j2 output is off without ``debug``, :mod:`spark_dpsynth.data.session`) is copied as it comes, until
:func:`mute_jvm` (the command line mutes the JVM when it is interrupted: its cancelled tasks' stack traces must not
follow the one line it prints).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LAUNCHER_BANNER", "copy_stderr", "jvm_muted", "mute_jvm", "piped_jvm_launch"]

LAUNCHER_BANNER = (b"WARNING: Using incubator modules:",)
"""Starts of the lines the Java launcher writes before the JVM runs any code, left out without ``debug``."""

_MUTED = threading.Event()
_LAUNCHING = threading.Lock()
"""Held while a launch is piped: a launch inside another one (the command line's around ``get_session``'s) is
left to the outer one."""


def mute_jvm() -> None:
    """Stop copying the JVM's stderr to this process's stderr (for the rest of the process)."""
    _MUTED.set()


def jvm_muted() -> bool:
    """True once :func:`mute_jvm` was called (or a stop signal seen by a copy with a wakeup fd)."""
    return _MUTED.is_set()


def copy_stderr(
    source: int, wakeup: int | None, target: int, banner: tuple[bytes, ...] = (), stops: tuple[int, ...] = ()
) -> None:
    """Copy ``source`` to ``target`` until ``source`` ends; after :func:`mute_jvm`, or a byte of ``stops`` (signal
    numbers) on the ``wakeup`` fd (``signal.set_wakeup_fd``'s pipe: it sees a signal the moment it is delivered),
    read and drop. The first lines of ``source`` that start with one of ``banner`` are left out (held until their
    line ends; any other line ends the banner)."""
    fds = [source] if wakeup is None else [source, wakeup]
    head = b""  # the start of the stream, while it may still be banner lines
    in_banner = bool(banner)
    while True:
        ready, _, _ = select.select(fds, [], [])
        if wakeup is not None and wakeup in ready:
            try:
                received = os.read(wakeup, 64)
            except BlockingIOError:
                received = b""
            if any(b in stops for b in received):
                _MUTED.set()
        if source in ready:
            data = os.read(source, 65536)
            if in_banner:
                head, data, in_banner = _drop_banner(head + data, banner, ended=not data)
            if not data and not in_banner:
                os.close(source)
                return
            if data and not _MUTED.is_set():
                with contextlib.suppress(OSError):
                    os.write(target, data)


def _drop_banner(text: bytes, banner: tuple[bytes, ...], *, ended: bool) -> tuple[bytes, bytes, bool]:
    """(what to hold, what to copy, whether banner lines may still follow) of the stream's start ``text``: whole
    lines starting with one of ``banner`` are dropped; a partial line that may still become one is held, unless
    the stream ``ended``; the first other line ends the banner."""
    while text:
        line, newline, rest = text.partition(b"\n")
        if not newline:  # a partial line: hold it while it may still be a banner line
            maybe = any(b.startswith(line) or line.startswith(b) for b in banner)
            return (text, b"", True) if maybe and not ended else (b"", text, False)
        if not any(line.startswith(b) for b in banner):
            return b"", text, False
        text = rest
    return b"", b"", not ended


@contextlib.contextmanager
def piped_jvm_launch(
    *,
    debug: bool = False,
    preexec: Callable[[], None] | None = None,
    wakeup: Callable[[], int | None] | None = None,
    stops: tuple[int, ...] = (),
) -> Iterator[list[subprocess.Popen]]:
    """Within the block, a JVM that PySpark's gateway launches writes its stderr into a pipe that a daemon thread
    copies to this process's stderr (module docstring), without the launcher's banner unless ``debug``.

    Args:
        debug: copy everything, the launcher's banner included.
        preexec: run in the JVM's process before it starts (after PySpark's own), e.g. to ignore signals.
        wakeup: called once a JVM was launched: a wakeup fd for :func:`copy_stderr` (or None).
        stops: the signal numbers that mute the copy when seen on the wakeup fd.

    Yields:
        The list of processes launched in the block (filled as they start). Inside another such block, or with
        PySpark's gateway changed by someone else, nothing is piped and the list stays empty.
    """
    if not _LAUNCHING.acquire(blocking=False):
        yield []
        return
    try:
        import pyspark.java_gateway as gateway

        read_end, write_end = os.pipe()
        launched: list[subprocess.Popen] = []
        original = gateway.Popen

        def popen(command: Any, **kwargs: Any) -> subprocess.Popen:
            inner = kwargs.get("preexec_fn")

            def both() -> None:
                if inner is not None:
                    inner()
                if preexec is not None:
                    preexec()

            kwargs["preexec_fn"] = both
            if kwargs.get("stderr") is None:
                kwargs["stderr"] = write_end
            proc = original(command, **kwargs)
            launched.append(proc)
            return proc

        gateway.Popen = popen  # type: ignore[assignment, misc]
        try:
            yield launched
        finally:
            gateway.Popen = original  # type: ignore[misc]
            os.close(write_end)
            if not launched:
                os.close(read_end)
            else:
                threading.Thread(
                    target=copy_stderr,
                    args=(
                        read_end,
                        wakeup() if wakeup else None,
                        os.dup(2),
                        () if debug else LAUNCHER_BANNER,
                    ),
                    kwargs={"stops": stops},
                    name="spark-dpsynth-jvm-stderr",
                    daemon=True,
                ).start()
    finally:
        _LAUNCHING.release()
