"""Publishing the outputs of a run: staged, checked, and moved into place all together or not at all.

A run writes every output first to its **staging directory** ``DIR/.spark-dpsynth-staging-<id>`` (catalog tables
to ``db.t__spark_dpsynth_tmp_<id>``) and publishes them in one step at the end (:class:`OutputStage`,
docs/design.md section 1.7):

* **Claim (before any data is read).** Opening a stage creates ``DIR``, checks that every destination can be
  written (``DIR`` itself and, with ``overwrite``, every existing output it replaces), refuses an existing output
  without ``overwrite`` and an output that another *live* run is writing, and records its owner (pid, host, start
  time, the outputs it claims) in ``.owner.json``, locked (``flock``) for the run's lifetime.
* **Publish (all or nothing).** Under the directory lock ``DIR/.spark-dpsynth.lock`` the no-overwrite check is
  made again; a journal ``.journal.json`` is written; every existing output of the run's scope (the outputs it
  writes and the *stale* ones an overwrite removes, e.g. an old ``synthetic.csv`` when this run writes none) is
  renamed aside to ``DIR/.spark-dpsynth-old-<id>-<name>``, the staged outputs are renamed into place, the catalog
  tables are published last, and the journal is marked committed. A failure at any step before the commit moves
  everything back: the previous outputs are left exactly as they were. Only after the commit are the old
  outputs deleted.
* **Recovery: to a reader ``DIR`` is all-old or all-new.** A run that died (killed, power loss) leaves its staging
  directory behind with an unlocked owner file, and maybe a publish cut at any step. Before anything of ``DIR`` is
  read or written, the next run (entering its stage) and every reader (``synthesize``, ``evaluate``, ``query``,
  ``Release.load``: :func:`recover_before_reading`) settle it under the directory lock (:func:`clean_dead_stagings`):
  a journal not committed is rolled back (the outputs renamed in go back, the old ones are restored), a committed
  one rolled forward (the new outputs are all in place; the old ones renamed aside are deleted), and the staging
  removed (docs/design.md section 1.7). A staging directory whose owner still holds its lock is a live run's and is
  never touched. What a dead run kept (:meth:`OutputStage.keep_staged`, a drawn release whose budget is spent) is
  never deleted: when its publish is rolled back it is moved to ``DIR/spark-dpsynth-recovered-<id>/`` (laid out as
  an output directory) and a warning says where. A reader that cannot write ``DIR`` reads it as it is, unless a dead
  run's publish is unfinished there (:class:`~spark_dpsynth.errors.ReleaseError`).
* **Nothing found is trusted.** Anyone who can write ``DIR`` can plant entries in it, so the recovery acts only
  on a staging directory that is a real directory (not a link) of the user's own, whose owner file and journal
  are regular JSON files naming only plain entry names (one path component, no ``..``, not hidden) that the
  owner file claims; anything else is refused (:class:`InvalidParameterError`, exit status 2) and left as it is.
  No link is followed: the lock file and the records are opened with ``O_NOFOLLOW``, a staging directory is
  emptied through its file descriptor, and a rename moves an entry of ``DIR`` itself, never what it points to.
* **Marks.** An output ``X`` may carry a mark ``X.TEST-MODE.txt`` beside it (a test-mode output, docs/outputs.md):
  the mark is part of ``X``'s scope, published, replaced and removed with it.

Renames stay within ``DIR`` (a staged directory is ours and writable), so a destination directory never needs
write permission of its own to be renamed aside. ``DIR`` must be on a file system with ``rename`` and ``flock``
(a local disk, NFS, a Databricks volume). Everything here uses the driver's file system and, for tables, the
DataFrame/SQL API only, so it runs on Spark Connect.

One file over 800 lines: the output stage's claim, publish and recovery are one protocol on one journal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import stat
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from spark_dpsynth.data.io import check_table_name, local_path, table_exists
from spark_dpsynth.errors import InvalidParameterError, OutputExistsError, ReleaseError, SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "BACKUP_PREFIX",
    "LOCK_FILE",
    "MARK_IN_DIRECTORY",
    "MARK_SUFFIX",
    "RECOVERED_PREFIX",
    "STAGING_PREFIX",
    "TEST_MODE_MARK_TEXT",
    "OutputStage",
    "atomic_path",
    "check_outputs_free",
    "check_writable",
    "clean_dead_stagings",
    "recover_before_reading",
    "signals_deferred",
    "write_text_atomically",
]

STAGING_PREFIX = ".spark-dpsynth-staging-"
"""Name prefix of a run's staging directory in ``DIR``."""
BACKUP_PREFIX = ".spark-dpsynth-old-"
"""Name prefix of a previous output renamed aside while a run publishes (``<prefix><id>-<name>``)."""
MARK_SUFFIX = ".TEST-MODE.txt"
"""Name ending of the mark beside a file output made in test mode (``synthetic.csv.TEST-MODE.txt``, saying the
output is NOT private; docs/outputs.md): part of its output's scope, claimed, replaced and removed with it."""
MARK_IN_DIRECTORY = "_TEST-MODE.txt"
"""The same mark inside a directory output (``synthetic/_TEST-MODE.txt``; Spark's readers skip names starting
with ``_``)."""
TEST_MODE_MARK_TEXT = (
    "TEST MODE: NOT PRIVATE. This synthetic table was made with a seed (--seed, test mode): every random draw\n"
    "came from a seeded, non-cryptographic generator, so it is reproducible and has NO differential privacy\n"
    "guarantee. Do not share it as private data. (spark-dpsynth; see docs/outputs.md)\n"
)
"""The text of a test-mode mark."""
LOCK_FILE = ".spark-dpsynth.lock"
"""The directory lock (``flock``) held while stagings are created, recovered and published; removed after use."""
LOCK_TIMEOUT_SECONDS = 120.0
"""Longest wait for the directory lock before giving up with an error naming the lock file."""
RECOVERED_PREFIX = "spark-dpsynth-recovered-"
"""Name prefix of the directory in ``DIR`` where the recovery keeps a dead run's drawn release
(``<prefix><id>/release``), which it never deletes."""
LEGACY_STAGING_SECONDS = 24 * 3600.0
"""A staging directory without an owner file (written by a version before owner files) is removed when nothing
in it changed for this long."""

_OWNER = ".owner.json"
_JOURNAL = ".journal.json"
_RECORD_MAX_BYTES = 1 << 20
"""Largest owner file or journal read (a run's records are a few hundred bytes)."""
_JOURNAL_STATES = ("publishing", "committed")
_TEST_MODE_PROPERTY = "spark_dpsynth.test_mode"
"""The table property that marks a test-mode catalog table (value ``NOT private``, docs/outputs.md)."""
_TMP_TABLE_SUFFIX = "__spark_dpsynth_tmp_"
_OLD_TABLE_SUFFIX = "__spark_dpsynth_old_"


# --------------------------------------------------------------------------------------------- small helpers


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the block runs (delivered when it ends): a rename sequence or a
    rollback is never cut in the middle by an interrupt."""
    sigs = {signal.SIGINT, signal.SIGTERM}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (AttributeError, OSError, ValueError):  # no POSIX signal masks here
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _remove(path: str, dir_fd: int | None = None) -> None:
    """Remove a file, a link or a directory tree (a missing path raises FileNotFoundError); a link is removed,
    never followed, and a tree is removed through file descriptors (``shutil.rmtree``'s symlink-safe walk).

    Args:
        path: the entry; relative to ``dir_fd`` when given.
        dir_fd: an open directory the path is relative to (None: the working directory).
    """
    if stat.S_ISDIR(os.lstat(path, dir_fd=dir_fd).st_mode):
        shutil.rmtree(path, dir_fd=dir_fd)
    else:
        os.unlink(path, dir_fd=dir_fd)


def _remove_quietly(path: str, attempts: int = 5, dir_fd: int | None = None) -> bool:
    """:func:`_remove`, retried (a cancelled Spark task may still be writing there); False if it failed."""
    for attempt in range(attempts):
        try:
            _remove(path, dir_fd)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if attempt + 1 < attempts:
                time.sleep(0.2 * (attempt + 1))
    log.warning("could not remove %s", path)
    return False


def _write_json(path: str, value: dict[str, Any]) -> None:
    """Write JSON to ``path`` through a temporary file and a rename, fsynced."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


def _read_json(path: str) -> dict[str, Any] | None:
    """:func:`_read_record`, None for anything but a readable JSON object (for messages and liveness only)."""
    try:
        return _read_record(path)
    except ValueError:
        return None


def _read_record(path: str, dir_fd: int | None = None) -> dict[str, Any] | None:
    """The JSON object in the regular file ``path`` (an owner file or a journal), never through a link.

    Returns:
        The object; None when nothing is at ``path``.

    Raises:
        ValueError: saying why the entry is not such a file (a link, a FIFO, too large, not a JSON object).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as err:
        what = (
            "a symbolic link" if err.errno == errno.ELOOP else f"unreadable ({os.strerror(err.errno or 0)})"
        )
        raise ValueError(f"{os.path.basename(path)} is {what}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{os.path.basename(path)} is not a regular file")
        if info.st_size > _RECORD_MAX_BYTES:
            raise ValueError(f"{os.path.basename(path)} is larger than {_RECORD_MAX_BYTES} bytes")
        data = os.read(fd, _RECORD_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if not data:  # an owner file being rewritten when its run died (truncated, not yet written)
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError as err:
        raise ValueError(f"{os.path.basename(path)} is not JSON") from err
    if not isinstance(value, dict):
        raise ValueError(f"{os.path.basename(path)} is not a JSON object")
    return value


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_alive(owner: dict[str, Any]) -> bool:
    """Liveness from the owner record when ``flock`` cannot tell: the same host's process table, else live."""
    if owner.get("host") != socket.gethostname():
        return True  # another host's run: never assume it is dead
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    started = owner.get("process_start")
    return started is None or _process_start(pid) in (None, started)


def _fail_access(path: str, err: OSError) -> InvalidParameterError:
    reason = os.strerror(err.errno) if err.errno else type(err).__name__
    return InvalidParameterError(f"cannot write the output {path}: {reason}")


def _refuse(out_dir: str, entry: str, reason: str) -> InvalidParameterError:
    """The error for an entry of ``out_dir`` that spark-dpsynth did not write as it finds it (a staging
    directory, a journal, an owner file or the lock file planted or damaged): it is left as it is."""
    return InvalidParameterError(
        f"cannot write the output {out_dir}: {entry} is not as spark-dpsynth writes it ({reason}); nothing in "
        "it was touched: inspect it and remove it by hand"
    )


def _plain_name(name: object) -> bool:
    """True for a plain entry name of an output directory: one path component, not hidden, not ``..``."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 255
        and not name.startswith(".")
        and "/" not in name
        and "\x00" not in name
        and name == os.path.basename(name)
    )


@contextmanager
def _dir_lock(directory: str, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the exclusive lock ``directory/.spark-dpsynth.lock`` (``flock``); the file is removed on release.

    After taking the lock, the file must still be the one at the path (another holder may have removed it):
    otherwise the lock is taken again on the new file.
    """
    path = os.path.join(directory, LOCK_FILE)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise _refuse(directory, path, "it is a symbolic link") from err
            raise _fail_access(directory, err) from err
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _refuse(directory, path, "it is not a regular file")
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OutputExistsError(
                            f"another run is publishing in {directory} (its lock {path} was held for "
                            f"{timeout:.0f} s); retry when it has finished"
                        ) from None
                    time.sleep(0.05)
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(path))
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


# --------------------------------------------------------------------------------------------- checks


def check_outputs_free(out_dir: str, names: Iterable[str], *, overwrite: bool) -> None:
    """Raise if one of ``out_dir/name`` exists and ``overwrite`` is False (a file-system check, no Spark).

    Raises:
        OutputExistsError: naming the existing outputs.
    """
    if overwrite:
        return
    base = local_path(out_dir)
    existing = [os.path.join(out_dir, n) for n in names if os.path.lexists(os.path.join(base, n))]
    if existing:
        raise OutputExistsError(
            f"output exists: {', '.join(existing)}; pass --overwrite to replace "
            + ("it" if len(existing) == 1 else "them")
        )


def check_writable(out_dir: str, names: Iterable[str] = ()) -> None:
    """Raise unless the driver can create entries in ``out_dir`` and remove every existing ``out_dir/name``
    (a directory tree needs write and search permission on each of its directories); no data is read.

    Raises:
        InvalidParameterError: naming the first path that cannot be written.
    """
    base = os.path.abspath(local_path(out_dir))
    probe = base
    while not os.path.exists(probe):  # the nearest existing ancestor must let us create the directory
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise InvalidParameterError(f"cannot write the output {out_dir}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"cannot write the output {probe}: {_why_not_writable(probe)}")
    for name in names:
        final = os.path.join(base, name)
        if not os.path.isdir(final) or os.path.islink(final):
            continue
        if os.path.ismount(final):
            raise InvalidParameterError(f"cannot replace the output {final}: it is a mount point")
        for root, _dirs, _files in os.walk(final):
            if not os.access(root, os.W_OK | os.X_OK):
                raise InvalidParameterError(
                    f"cannot replace the output {final}: {root} is not writable ({_why_not_writable(root)})"
                )


def _why_not_writable(path: str) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


# --------------------------------------------------------------------------------------------- stagings


def _backup_name(ident: str, name: str) -> str:
    return f"{BACKUP_PREFIX}{ident}-{name}"


def _staging_is_live(staging: str) -> bool:
    """True when a live run owns ``staging`` (its owner file is locked, or, without flock, its pid runs).

    An owner file that is a link or not a regular file is no run's: False (the recovery then refuses it).
    """
    owner_path = os.path.join(staging, _OWNER)
    try:
        fd = os.open(owner_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            if not os.listdir(staging):  # emptied by a run that died removing it (under the directory lock a
                return False  # live run's staging always has its owner file)
        # Written by an older version (no owner file): dead once nothing in it changed for a day.
        newest = 0.0
        for root, dirs, files in os.walk(staging):
            for n in (root, *(os.path.join(root, x) for x in dirs + files)):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(n).st_mtime)
        return time.time() - newest < LEGACY_STAGING_SECONDS
    except OSError as err:
        return err.errno != errno.ELOOP
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as err:  # no flock on this file system: the owner record decides
        if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
            return True
        return _pid_alive(_read_json(owner_path) or {})
    finally:
        os.close(fd)
    return False


def _lexists_at(name: str, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _dead_run_journal(
    out_dir: str, staging: str, fd: int, backups: Iterable[str]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The journal of the dead run whose staging directory is open as ``fd``, once everything the recovery acts
    on is checked to be as a run writes it: nothing found in ``out_dir`` is trusted (docs/design.md section 1.7).

    The staging directory is the user's own (when not running as root: a file system may show root's files as
    another user's); its owner file and journal are regular JSON files, not links; every name the journal or an
    output renamed aside (``backups``, entries of ``out_dir``) gives is a plain entry name (one path component,
    not hidden, no ``..``) among the names the owner file claims; an output renamed aside has a journal.

    Returns:
        The journal (state ``publishing`` or ``committed``), None when the run died before publishing; and the
        entries the run kept (:meth:`OutputStage.keep_staged`: a drawn release), plain names it claims.

    Raises:
        InvalidParameterError: naming the staging directory and what is wrong; nothing was changed.
    """
    euid = os.geteuid()
    info = os.fstat(fd)
    if euid != 0 and info.st_uid != euid:
        raise _refuse(out_dir, staging, f"it belongs to another user (uid {info.st_uid})")
    try:
        owner = _read_record(_OWNER, fd)
        journal = _read_record(_JOURNAL, fd)
    except ValueError as err:
        raise _refuse(out_dir, staging, str(err)) from None
    listed = (owner or {}).get("names")
    claimed = {n for n in listed if _plain_name(n)} if isinstance(listed, list) else set()
    kept = (owner or {}).get("kept", [])
    if not isinstance(kept, list) or not all(_plain_name(n) and n in claimed for n in kept):
        raise _refuse(out_dir, staging, "its owner file keeps a name that is not an output of that run")
    prefix = f"{BACKUP_PREFIX}{os.path.basename(staging)[len(STAGING_PREFIX) :]}-"
    aside = [b[len(prefix) :] for b in backups]
    if journal is None:
        if aside:
            raise _refuse(
                out_dir, staging, f"{prefix}{aside[0]} was renamed aside but the run has no journal"
            )
        return None, kept
    if owner is None:
        raise _refuse(out_dir, staging, "it has a journal but no owner file")
    if journal.get("state") not in _JOURNAL_STATES:
        raise _refuse(out_dir, staging, "its journal has no known state")
    for key in ("names", "stale"):
        listed = journal.get(key, [])
        if not isinstance(listed, list):
            raise _refuse(out_dir, staging, f"its journal's {key} is not a list")
        for name in listed:
            if not _plain_name(name) or name not in claimed:
                raise _refuse(
                    out_dir, staging, f"its journal names {str(name)[:80]!r}, not an output of that run"
                )
    for name in aside:
        if not _plain_name(name) or name not in claimed:
            raise _refuse(out_dir, staging, f"{prefix}{name} is not an output of that run renamed aside")
    return journal, kept


def _rollback_dead(
    out_dir: str, fd: int, ident: str, journal: dict[str, Any] | None, backups: Iterable[str]
) -> bool:
    """Undo or finish the publish of a dead run from its checked journal and outputs renamed aside (``backups``,
    entries of ``out_dir``; :func:`_dead_run_journal`) and the file system; its staging directory is open as
    ``fd``. True when done.

    Every rename is between two entries of ``out_dir`` or its staging directory: a name is never resolved
    through a link.
    """
    ok = True
    committed = journal is not None and journal["state"] == "committed"
    if journal is not None and not committed:
        for name in journal.get("names", []):
            final = os.path.join(out_dir, name)
            if not _lexists_at(name, fd) and os.path.lexists(final):
                os.replace(final, name, dst_dir_fd=fd)  # the dead run's new output goes back to its staging
    prefix = f"{BACKUP_PREFIX}{ident}-"
    for entry in sorted(backups):
        backup = os.path.join(out_dir, entry)
        final = os.path.join(out_dir, entry[len(prefix) :])
        if committed:
            ok = _remove_quietly(backup) and ok
        elif not os.path.lexists(final):
            os.replace(backup, final)
            log.warning("restored %s from an interrupted run", final)
        else:
            log.warning("both %s and its earlier version %s exist; left both", final, backup)
            ok = False
    return ok


def _keep_recovered(
    out_dir: str, fd: int, ident: str, kept: list[str], why: str = "died after it drew its release"
) -> None:
    """Move the kept outputs of a dead run (a drawn release: its budget is spent) out of its staging directory
    (open as ``fd``) to ``out_dir/spark-dpsynth-recovered-<id>/`` and say where: never deleted with the staging.

    The recovered directory is laid out as an output directory, so a ``synthesize`` with ``--output`` there
    goes on from the release without spending budget (docs/design.md section 1.7).
    """
    present = [n for n in kept if _lexists_at(n, fd)]
    if not present:
        return
    target = os.path.join(out_dir, f"{RECOVERED_PREFIX}{ident}")
    try:
        os.mkdir(target)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(target).st_mode):  # a link planted there is not followed
            raise _refuse(out_dir, target, "it is not a directory") from None
    for name in present:
        os.replace(name, os.path.join(target, name), src_dir_fd=fd)
    resume = shlex.join(["spark-dpsynth", "synthesize", "--output", target])
    log.warning(
        "a run on %s %s (the budget is spent): its kept outputs (%s) are in %s, "
        "not published; go on from them with `%s` and that run's options, or move them into %s",
        out_dir,
        why,
        ", ".join(present),
        target,
        resume,
        out_dir,
    )


def clean_dead_stagings(out_dir: str) -> list[str]:
    """Recover and remove the staging directories of dead runs in ``out_dir``; returns the removed paths.

    Call it with the directory lock held (:class:`OutputStage` does). A staging directory of a live run (its
    owner file is locked) is never touched. A dead run that was publishing is rolled back (its journal was not
    committed) or finished (it was); earlier outputs renamed aside by a run whose staging is gone are removed.
    The outputs a dead run kept (a drawn release) are never removed: they are moved to
    ``out_dir/spark-dpsynth-recovered-<id>/`` and a warning says where.
    Nothing found is trusted: a staging directory that is a link, or whose owner file, journal or outputs
    renamed aside are not as a run writes them (:func:`_dead_run_journal`), is refused and left as it is; no
    link is followed and nothing outside ``out_dir`` is moved, changed or removed.

    Raises:
        InvalidParameterError: a staging directory is refused (the message names it and what is wrong).
    """
    removed: list[str] = []
    base = os.path.abspath(local_path(out_dir))
    try:
        entries = sorted(os.listdir(base))
    except FileNotFoundError:
        return removed
    idents = set()
    for entry in entries:
        if not entry.startswith(STAGING_PREFIX):
            continue
        staging = os.path.join(base, entry)
        ident = entry[len(STAGING_PREFIX) :]
        idents.add(ident)
        try:
            mode = os.lstat(staging).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise _refuse(base, staging, "it is a symbolic link")
        if not stat.S_ISDIR(mode) or _staging_is_live(staging):
            continue
        if not ident.isascii() or not ident.isalnum():
            raise _refuse(base, staging, "its name does not end in a run's id")
        try:
            fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(base, staging, "it is a symbolic link") from err
            log.warning("could not recover the staging %s of a dead run: %s", staging, err)
            continue
        try:
            backups = [e for e in entries if e.startswith(f"{BACKUP_PREFIX}{ident}-")]
            journal, kept = _dead_run_journal(base, staging, fd, backups)
            try:
                done = _rollback_dead(base, fd, ident, journal, backups)
                if done and not (journal is not None and journal["state"] == "committed"):
                    _keep_recovered(base, fd, ident, kept)
            except OSError as err:
                log.warning("could not recover the staging %s of a dead run: %s", staging, err)
                continue
            if done and _remove_staging(staging, fd):
                removed.append(staging)
                log.info("removed the staging directory of a dead run: %s", staging)
        finally:
            os.close(fd)
    for entry in entries:  # renamed-aside outputs of a run that committed and then lost its staging
        if entry.startswith(BACKUP_PREFIX):
            ident = entry[len(BACKUP_PREFIX) :].split("-", 1)[0]
            if ident not in idents and _remove_quietly(os.path.join(base, entry)):
                removed.append(os.path.join(base, entry))
    return removed


def recover_before_reading(out_dir: str) -> None:
    """Settle a dead run's interrupted publish in the output directory ``out_dir`` before its outputs are read:
    under the directory lock, :func:`clean_dead_stagings` rolls it back (its journal was not committed) or
    forward (it was), so that a reader finds either all the previous outputs or all the new ones, never a mix
    (docs/design.md section 1.7). Every command and library call that reads an output directory (``synthesize``,
    ``evaluate``, ``query``, :func:`spark_dpsynth.load` of ``DIR/release``) calls it first.

    A directory with neither a staging directory nor an output renamed aside (the usual case) is only listed:
    no lock, no write. One that the reader cannot write is read as it is, unless a dead run's publish is
    unfinished in it.

    Args:
        out_dir: the output directory (a ``file:`` prefix is accepted); a missing one is left alone.

    Raises:
        ReleaseError: a dead run's publish is unfinished in ``out_dir`` and the reader cannot write it (the
            message says to run a command with write access).
        InvalidParameterError: a staging directory is refused (:func:`clean_dead_stagings`).
        OutputExistsError: a live run held the directory lock longer than :data:`LOCK_TIMEOUT_SECONDS`.
    """
    base = os.path.abspath(local_path(out_dir))
    try:
        entries = os.listdir(base)
    except OSError:  # missing, not a directory, unreadable: the reader reports what it cannot read
        return
    if not any(e.startswith((STAGING_PREFIX, BACKUP_PREFIX)) for e in entries):
        return
    if not os.access(base, os.W_OK | os.X_OK):
        for entry in sorted(entries):
            staging = os.path.join(base, entry)
            if not entry.startswith(STAGING_PREFIX) or os.path.islink(staging):
                continue
            journal = _read_json(os.path.join(staging, _JOURNAL)) or {}
            # liveness from the owner record: probing its lock without the directory lock could take it from a
            # run that is just starting
            if journal.get("state") == "publishing" and not _pid_alive(
                _read_json(os.path.join(staging, _OWNER)) or {}
            ):
                raise ReleaseError(
                    f"the outputs in {base} are half published by a run that died ({staging}); run any "
                    "spark-dpsynth command on that directory with write access to settle them first"
                )
        return
    with signals_deferred(), _dir_lock(base):
        clean_dead_stagings(base)


def _remove_staging(staging: str, fd: int | None = None) -> bool:
    """Remove a staging directory, its owner file last (a half-removed staging still names its owner).

    Its entries are removed through the directory's file descriptor (``fd``, else opened here without following
    a link): a staging directory swapped for a link meanwhile is not followed.
    """
    if fd is None:
        try:
            own = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return True
        except OSError as err:
            log.warning("could not remove %s: %s", staging, os.strerror(err.errno or 0))
            return False
        try:
            return _remove_staging(staging, own)
        finally:
            os.close(own)
    ok = True
    for entry in os.listdir(fd):
        if entry != _OWNER:
            ok = _remove_quietly(entry, dir_fd=fd) and ok
    if ok:
        ok = _remove_quietly(_OWNER, dir_fd=fd)
        with contextlib.suppress(OSError):
            os.rmdir(staging)
            return ok
        ok = not os.path.lexists(staging)
    return ok


# --------------------------------------------------------------------------------------------- single outputs


def _replace(staged: str, final: str) -> None:
    """Move ``staged`` to ``final``, replacing what is there (never a half-written ``final``).

    A file is replaced by one atomic rename; a directory is first renamed aside (in its own directory, so it
    needs no write permission of its own), and put back if the second rename fails.
    """
    old = None
    if os.path.lexists(final) and os.path.isdir(final) and not os.path.islink(final):
        old = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
    try:
        os.replace(staged, final)
    except BaseException:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        _remove_quietly(old)


@contextmanager
def atomic_path(path: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary path next to the local ``path``; move it to ``path`` when the block succeeds.

    Whatever the block writes at the temporary path (a file or a directory) replaces ``path`` by renames; if
    the block raises (an interrupt included), the temporary path is removed and ``path`` is left as it was.
    The existence check is made again just before the rename.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is False (before the block runs, or when another
            writer created it meanwhile).
    """
    final = os.path.abspath(local_path(path))
    if os.path.lexists(final) and not overwrite:
        raise OutputExistsError(f"output exists: {path}; pass --overwrite (overwrite=True) to replace it")
    parent = os.path.dirname(final)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        raise _fail_access(parent, err) from err
    tmp = os.path.join(parent, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if not os.path.lexists(tmp):
            raise SparkSetupError(f"nothing was written for {path}")
        with signals_deferred():
            if overwrite:
                _replace(tmp, final)
            elif os.path.isdir(tmp):
                try:
                    os.rename(tmp, final)  # fails on an existing non-empty directory
                except OSError as err:
                    if os.path.lexists(final):
                        raise OutputExistsError(
                            f"output exists: {path}; pass --overwrite to replace it"
                        ) from err
                    raise
            else:
                try:
                    os.link(tmp, final)  # an atomic create: fails if final exists
                except FileExistsError:
                    raise OutputExistsError(
                        f"output exists: {path}; pass --overwrite to replace it"
                    ) from None
                except OSError:  # no hard links on this file system: check, then rename
                    if os.path.lexists(final):
                        raise OutputExistsError(
                            f"output exists: {path}; pass --overwrite to replace it"
                        ) from None
                    os.replace(tmp, final)
    finally:
        _remove_quietly(tmp, attempts=2)


def write_text_atomically(directory: str, name: str, text: str) -> str:
    """Write ``text`` (UTF-8) to ``directory/name`` through a temporary file in the same directory and a rename,
    so a reader never sees a half-written file; creates the directory (a ``file:`` prefix is accepted).

    Returns:
        The path of the written file.

    Raises:
        OSError: the directory cannot be created or written.
    """
    directory = local_path(directory)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)
    return path


# --------------------------------------------------------------------------------------------- the stage


def _tmp_table_name(name: str, suffix: str, ident: str) -> str:
    parts = name.split(".")
    last = parts[-1]
    bare = last.strip("`")
    tmp = f"{bare}{suffix}{ident}"
    parts[-1] = f"`{tmp}`" if last.startswith("`") else tmp
    return ".".join(parts)


def _has_property(spark: SparkSession, table: str, key: str) -> bool:
    """True when the catalog table ``table`` has the table property ``key`` (``SHOW TBLPROPERTIES``)."""
    return any(row[0] == key for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect())


def _already_exists(err: BaseException) -> bool:
    text = str(err)
    return "ALREADY_EXISTS" in text or "already exists" in text


class OutputStage:
    """The outputs of one run, staged, then published together or not at all (see the module docstring).

    Use as a context manager. Entering claims the outputs and checks them before any data is read; a normal
    exit publishes every staged output at once; an exception (an interrupt included) removes what was staged
    and changes no destination, except the outputs marked with :meth:`keep_staged` (a DP release whose budget
    is spent, docs/design.md section 1.7): those are published alone, all together or not at all, and the
    other outputs of the scope are then stale (removed with ``overwrite``: they were computed from the
    previous release).

    Args:
        spark: the session, for catalog tables only (None: set it later with :meth:`use_session`).
        out_dir: the local output directory that receives the directory outputs.
        overwrite: replace existing outputs (otherwise an existing one is :class:`OutputExistsError`).
        names: the entries of ``out_dir`` this run writes, claimed and checked on entering (more can be added
            by :meth:`path`); e.g. ``("release", "synthetic", "evaluation")``.
        stale: entries of ``out_dir`` that belong to this run's scope but that it does not write (e.g. an
            earlier ``synthetic.csv``): with ``overwrite`` they are removed when the run publishes (in the same
            all-or-nothing step), without it they are existing outputs (an error).

    Raises:
        OutputExistsError: (on entering, :meth:`path`, :meth:`table` or publishing) an output exists and
            overwrite is off, or a live run claims one of the same outputs.
        InvalidParameterError: ``out_dir`` or an output to replace cannot be written (the message names it).
    """

    def __init__(
        self,
        spark: SparkSession | None,
        out_dir: str,
        *,
        overwrite: bool = False,
        names: Iterable[str] = (),
        stale: Iterable[str] = (),
    ) -> None:
        self._spark = spark
        self._out_dir = os.path.abspath(local_path(out_dir))
        self._overwrite = overwrite
        self._id = uuid.uuid4().hex[:12]
        self._staging = os.path.join(self._out_dir, f"{STAGING_PREFIX}{self._id}")
        self._declared = [self._check_name(n) for n in names]
        self._stale = [self._check_name(n) for n in stale if n not in self._declared]
        self._paths: list[str] = []
        self._tables: list[tuple[str, str, str]] = []  # (staged, final, format)
        self._owner_fd: int | None = None
        self._owner: dict[str, Any] = {}
        self._keep_staging = False
        self._kept: list[str] = []
        self._kept_tables = 0
        self.published: list[str] = []
        """The entries of ``out_dir`` published (set on a successful exit)."""
        self.published_tables: list[str] = []
        """The catalog tables published (set on a successful exit)."""

    @staticmethod
    def _check_name(name: str) -> str:
        if not _plain_name(name):
            raise InvalidParameterError(
                f"an output name must be a plain file or directory name, got {name!r}"
            )
        return name

    @property
    def out_dir(self) -> str:
        """The final output directory."""
        return self._out_dir

    @property
    def staging_dir(self) -> str:
        """The hidden directory in ``out_dir`` where this run's directory outputs are written first."""
        return self._staging

    def use_session(self, spark: SparkSession) -> None:
        """Set the session used for catalog tables (a stage opened before Spark started)."""
        self._spark = spark

    # ------------------------------------------------------------------ claiming
    def __enter__(self) -> OutputStage:
        try:
            os.makedirs(self._out_dir, exist_ok=True)
        except OSError as err:
            check_writable(self._out_dir)
            raise _fail_access(self._out_dir, err) from err
        check_writable(self._out_dir, self._scope() if self._overwrite else ())
        with signals_deferred(), _dir_lock(self._out_dir):
            clean_dead_stagings(self._out_dir)
            self._check_claims(self._scope())
            check_outputs_free(self._out_dir, [*self._scope(), *self._marks()], overwrite=self._overwrite)
            try:
                os.mkdir(self._staging)
                fd = os.open(os.path.join(self._staging, _OWNER), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except OSError as err:
                _remove_quietly(self._staging, attempts=1)
                raise _fail_access(self._out_dir, err) from err
            self._owner_fd = fd
            with contextlib.suppress(OSError):  # without flock, liveness falls back to the pid
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._owner = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "process_start": _process_start(os.getpid()),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "names": [*self._scope(), *self._marks()],
            }
            self._save_owner()
        return self

    def _scope(self) -> list[str]:
        return list(dict.fromkeys([*self._declared, *self._paths, *self._stale]))

    def _marks(self) -> list[str]:
        """The marks (:data:`MARK_SUFFIX`) of the scope's entries that the run does not write: part of the
        scope as stale entries (an earlier test-mode mark never stays beside a newer output)."""
        scope = self._scope()
        return [
            f"{n}{MARK_SUFFIX}"
            for n in scope
            if not n.endswith(MARK_SUFFIX) and f"{n}{MARK_SUFFIX}" not in scope
        ]

    def _save_owner(self) -> None:
        assert self._owner_fd is not None
        data = json.dumps(self._owner).encode()
        os.ftruncate(self._owner_fd, 0)
        os.pwrite(self._owner_fd, data, 0)

    def _check_claims(self, names: list[str]) -> None:
        """Raise if a live run's staging in out_dir claims one of ``names`` (call with the lock held)."""
        for entry in sorted(os.listdir(self._out_dir)):
            staging = os.path.join(self._out_dir, entry)
            if not entry.startswith(STAGING_PREFIX) or staging == self._staging or os.path.islink(staging):
                continue
            owner = _read_json(os.path.join(staging, _OWNER)) or {}
            both = sorted(set(names) & set(owner.get("names", [])))
            if both and _staging_is_live(staging):
                who = f"pid {owner.get('pid')} on {owner.get('host')}, started {owner.get('started')}"
                raise OutputExistsError(
                    f"another run ({who}) is writing {', '.join(os.path.join(self._out_dir, n) for n in both)}; "
                    "wait for it to finish or choose another --output"
                )

    def path(self, name: str) -> str:
        """The staging path for ``out_dir/name`` (a file or a directory the caller writes).

        Raises:
            OutputExistsError: ``out_dir/name`` exists and overwrite is off, or a live run claims it.
        """
        name = self._check_name(name)
        if self._owner_fd is None:
            raise RuntimeError("use the OutputStage as a context manager (with OutputStage(...) as stage)")
        if name not in self._scope():
            final = os.path.join(self._out_dir, name)
            if self._overwrite:
                check_writable(self._out_dir, [name])
            with signals_deferred(), _dir_lock(self._out_dir):
                self._check_claims([name])
                if os.path.lexists(final) and not self._overwrite:
                    raise OutputExistsError(f"output exists: {final}; pass --overwrite to replace it")
                self._paths.append(name)
                self._owner["names"] = [*self._scope(), *self._marks()]
                self._save_owner()
        elif name not in self._paths:
            self._paths.append(name)
        if name in self._stale:  # written after all: published, not removed
            self._stale.remove(name)
        return os.path.join(self._staging, name)

    def table(self, name: str, fmt: str | None = None) -> str:
        """The staging table for the catalog table ``name``; the caller writes it with ``saveAsTable``.

        Args:
            name: the destination table.
            fmt: the table's format; None means the session's ``spark.sql.sources.default``.

        Raises:
            OutputExistsError: the table exists and overwrite is off.
        """
        if self._spark is None:
            raise RuntimeError("an OutputStage for tables needs a session (use_session)")
        check_table_name(name, "output table")
        if not self._overwrite and table_exists(self._spark, name):
            raise OutputExistsError(f"output table exists: {name}; pass --overwrite to replace it")
        fmt = fmt or str(self._spark.conf.get("spark.sql.sources.default", "parquet"))
        staged = _tmp_table_name(name, _TMP_TABLE_SUFFIX, f"{self._id}{len(self._tables)}")
        self._tables.append((staged, name, fmt))
        return staged

    # ------------------------------------------------------------------ keeping
    def keep_staged(self) -> list[str]:
        """Mark every output staged so far (entries of :meth:`path` written, tables of :meth:`table`) as kept:
        should the run fail later, they are still published (alone, all or nothing) when the stage exits.

        A pipeline calls it once its DP release is staged: the budget is spent, and a failure of a later stage
        (synthesis, writing, evaluation) must not throw the release away (docs/design.md section 1.7).

        Returns:
            The entries of ``out_dir`` kept so far.

        Raises:
            SparkSetupError: an entry given to :meth:`path` was not written.
        """
        missing = [n for n in self._paths if not os.path.lexists(os.path.join(self._staging, n))]
        if missing:
            raise SparkSetupError(f"nothing was written for {', '.join(missing)} in {self._out_dir}")
        self._kept = list(self._paths)
        self._kept_tables = len(self._tables)
        if (
            self._owner_fd is not None
        ):  # should this process die, the next run keeps them (clean_dead_stagings)
            self._owner["kept"] = list(self._kept)
            self._save_owner()
        return list(self._kept)

    @property
    def kept(self) -> list[str]:
        """The entries marked by :meth:`keep_staged` (published even when the run fails)."""
        return list(self._kept)

    # ------------------------------------------------------------------ publishing
    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        with signals_deferred():
            try:
                if exc_type is None:
                    self._publish()
                elif self._kept or self._kept_tables:
                    self._publish_kept()
            finally:
                self._cleanup()

    def _publish_kept(self) -> None:
        """After a failure: publish the kept outputs alone; the rest of the scope becomes stale (an older output
        computed from the previous release is removed with ``overwrite``, and cannot exist without it)."""
        kept = set(self._kept)
        # What was staged after the kept outputs goes first: a run that failed because the disk filled up (its
        # synthetic parts) frees that space before the kept outputs and the journal are written.
        for name in self._paths:
            if name not in kept:
                _remove_quietly(os.path.join(self._staging, name))
        self._stale = [n for n in self._scope() if n not in kept]
        self._paths = list(self._kept)
        unkept = self._tables[self._kept_tables :]
        self._tables = self._tables[: self._kept_tables]
        try:
            self._publish()
        except Exception as err:  # noqa: BLE001 - the run's own failure is the one reported
            self.published = []
            self.published_tables = []
            self._set_kept_aside(err)
        finally:
            self._tables += unkept  # dropped by _cleanup

    def _set_kept_aside(self, err: BaseException) -> None:
        """The kept outputs could not be published (``err``): move them out of the staging directory to
        ``out_dir/spark-dpsynth-recovered-<id>/`` (renames: no space needed), as the recovery of a dead run
        does, and say where; should even that fail, the staging directory is left for the next run's recovery.
        """
        why = os.strerror(err.errno) if isinstance(err, OSError) and err.errno else type(err).__name__
        try:
            fd = os.open(self._staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            fd = None
        try:
            if fd is None:
                raise OSError(errno.ENOENT, "the staging directory cannot be opened")
            _keep_recovered(
                self._out_dir, fd, self._id, self._kept, why=f"could not publish its drawn release ({why})"
            )
        except OSError as moved:
            self._keep_staging = True
            log.error(
                "the kept outputs (%s) could not be published (%s) nor moved aside (%s): they stay in %s, "
                "which the next run on %s recovers",
                ", ".join(self._kept),
                why,
                os.strerror(moved.errno or 0),
                self._staging,
                self._out_dir,
            )
        finally:
            if fd is not None:
                os.close(fd)

    def _publish(self) -> None:
        missing = [n for n in self._paths if not os.path.lexists(os.path.join(self._staging, n))]
        if missing:
            raise SparkSetupError(f"nothing was written for {', '.join(missing)} in {self._out_dir}")
        names = list(self._paths)
        with _dir_lock(self._out_dir):
            # again at publish time, under the lock: another run may have published meanwhile
            stale = [*self._stale, *self._marks()]
            check_outputs_free(self._out_dir, [*names, *stale], overwrite=self._overwrite)
            journal = {"state": "publishing", "names": names, "stale": stale}
            _write_json(os.path.join(self._staging, _JOURNAL), journal)
            done: list[tuple[str, str]] = []
            old_tables: list[tuple[str, str]] = []
            try:
                for name in [*names, *stale]:
                    final = os.path.join(self._out_dir, name)
                    if os.path.lexists(final):
                        os.replace(final, os.path.join(self._out_dir, _backup_name(self._id, name)))
                        done.append(("aside", name))
                for name in names:
                    os.replace(os.path.join(self._staging, name), os.path.join(self._out_dir, name))
                    done.append(("in", name))
                for staged, final, fmt in self._tables:
                    old = self._publish_table(staged, final, fmt)
                    if old is not None:
                        old_tables.append((old, final))
                _write_json(os.path.join(self._staging, _JOURNAL), {**journal, "state": "committed"})
            except BaseException:
                self._rollback(done, old_tables)
                raise
        for name in [*names, *stale]:
            backup = os.path.join(self._out_dir, _backup_name(self._id, name))
            if os.path.lexists(backup):
                _remove_quietly(backup)
        for old, _ in old_tables:
            self._drop_quietly(old)
        self.published = names
        self.published_tables = [t[1] for t in self._tables]
        for name in names:
            log.info("output written: %s", os.path.join(self._out_dir, name))
        for name in stale:
            if any(d == ("aside", name) for d in done):
                log.info("earlier output removed: %s", os.path.join(self._out_dir, name))

    def _rollback(self, done: list[tuple[str, str]], old_tables: list[tuple[str, str]]) -> None:
        """Undo the renames of a failed publish in reverse order (the previous outputs come back)."""
        spark = self._spark
        for old, final in reversed(old_tables):
            try:
                assert spark is not None
                spark.sql(f"DROP TABLE IF EXISTS {final}")
                spark.sql(f"ALTER TABLE {old} RENAME TO {final}")
            except Exception:  # noqa: BLE001 - reported, the rest is still rolled back
                log.error("could not restore the table %s from %s", final, old)
        for kind, name in reversed(done):
            final = os.path.join(self._out_dir, name)
            try:
                if kind == "in":
                    os.replace(final, os.path.join(self._staging, name))
                else:
                    os.replace(os.path.join(self._out_dir, _backup_name(self._id, name)), final)
            except OSError as err:
                # The staging keeps the journal: a later run rolls back what is left (clean_dead_stagings).
                self._keep_staging = True
                log.error("could not restore %s (%s); a later run on this directory will retry", final, err)

    def _publish_table(self, staged: str, final: str, fmt: str) -> str | None:
        """Publish one staged table; returns the name of the previous table renamed aside (or None)."""
        spark = self._spark
        assert spark is not None
        exists = table_exists(spark, final)
        if exists and not self._overwrite:  # created by someone else while this run was computing
            raise OutputExistsError(f"output table exists: {final}; pass --overwrite to replace it")
        try:
            if fmt == "delta":
                # The test-mode mark (a table property) does not travel with the rows: it is set on the existing
                # table before test-mode rows replace it, and after the write on the new one (a Delta write keeps
                # or lacks properties of its own); a table of private rows loses an earlier mark after the write.
                # Each window errs towards the mark (docs/outputs.md, "Test-mode marks").
                marked = _has_property(spark, staged, _TEST_MODE_PROPERTY)
                mark = f"ALTER TABLE {final} SET TBLPROPERTIES ('{_TEST_MODE_PROPERTY}' = 'NOT private')"
                if marked and exists:
                    spark.sql(mark)
                # one Delta transaction: atomic (an atomic create without overwrite), keeps the table's history
                spark.read.table(staged).write.format("delta").mode(
                    "overwrite" if exists else "error"
                ).option("overwriteSchema", "true").saveAsTable(final)
                if marked:
                    spark.sql(mark)
                elif exists:
                    spark.sql(f"ALTER TABLE {final} UNSET TBLPROPERTIES IF EXISTS ('{_TEST_MODE_PROPERTY}')")
                spark.sql(f"DROP TABLE IF EXISTS {staged}")
                old = None
            else:
                old = None
                if exists:
                    old = _tmp_table_name(final, _OLD_TABLE_SUFFIX, self._id)
                    spark.sql(f"ALTER TABLE {final} RENAME TO {old}")
                try:
                    spark.sql(f"ALTER TABLE {staged} RENAME TO {final}")  # fails if final exists
                except BaseException:
                    if old is not None:
                        spark.sql(f"ALTER TABLE {old} RENAME TO {final}")
                    raise
        except Exception as err:
            if not self._overwrite and _already_exists(err):
                raise OutputExistsError(
                    f"output table exists: {final}; pass --overwrite to replace it"
                ) from err
            raise
        log.info("output table written: %s", final)
        return old

    def _drop_quietly(self, table: str) -> None:
        try:
            assert self._spark is not None
            self._spark.sql(f"DROP TABLE IF EXISTS {table}")
        except Exception:  # noqa: BLE001 - best effort; the name says what it is
            log.warning("could not drop the table %s", table)

    def _cleanup(self) -> None:
        if not self._keep_staging:
            _remove_staging(self._staging)
        if self._owner_fd is not None:
            os.close(self._owner_fd)  # releases the owner lock: a kept staging is now a dead run's
            self._owner_fd = None
        if self._spark is not None:
            for staged, _, _ in self._tables:
                self._drop_quietly(staged)
