"""The scale benchmark's measurements: process start (for cold times), the process tree, peak RSS (``VmHWM``),
CPU seconds, a 0.1 s sampler of a command's process tree, and the description of the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

T_START = time.perf_counter()
"""``time.perf_counter()`` when the benchmark process imported this module (its start, for cold times, s)."""

# ------------------------------------------------------------------------------- process tree, RSS and CPU


def proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(entry)] = (int(fields[1]), comm)
    return out


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[tuple[int, str]]:
    """(pid, command name) of every descendant of ``root`` (in ``table``, default: :func:`proc_table` now)."""
    table = proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append((pid, table[pid][1]))
        todo.extend(children.get(pid, []))
    return out


def status_kb(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM`` field of /proc/<pid>/status in KiB (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeSampler:
    """Samples, every ``interval`` s, the RSS of a process and its descendants: peak of the root, of the JVMs, of
    the other descendants (Python workers) and of their sum; and the CPU seconds of every process seen."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root = root
        self.interval = interval
        self.peak = {"root": 0, "jvm": 0, "workers": 0, "total": 0}
        self.cpu: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def _visit(self, pid: int, kind: str, now: dict[str, int]) -> None:
        now[kind] += status_kb(pid, "VmRSS")
        self.cpu[pid] = max(self.cpu.get(pid, 0.0), _cpu_seconds(pid))
        self.kind[pid] = kind

    def _collect(self, now: dict[str, int], table: dict[int, tuple[int, str]]) -> None:
        """Add the RSS (KiB) of every process sampled to its kind in ``now``; record their CPU seconds."""
        self._visit(self.root, "root", now)
        for pid, comm in descendants(self.root, table):
            self._visit(pid, "jvm" if comm == "java" else "workers", now)

    def sample(self) -> None:
        now = dict.fromkeys(self.peak, 0)
        self._collect(now, proc_table())
        now["total"] = sum(v for k, v in now.items() if k != "total")
        for key, value in now.items():
            self.peak[key] = max(self.peak[key], value)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    @property
    def cpu_by_kind(self) -> dict[str, float]:
        out = {k: 0.0 for k in self.peak if k != "total"}
        for pid, seconds in self.cpu.items():
            out[self.kind[pid]] += seconds
        return out


def executor_pids(app_id: str, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """The executor JVMs of Spark application ``app_id`` running on this machine (a standalone worker's
    ``CoarseGrainedExecutorBackend ... --app-id app_id`` processes)."""
    table = proc_table() if table is None else table
    out = []
    for pid, (_, comm) in table.items():
        if comm != "java":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv and app_id.encode() in argv:
            out.append(pid)
    return sorted(out)


class ClusterSampler(TreeSampler):
    """A :class:`TreeSampler` of a driver that ``spark-submit`` started on a cluster whose workers run on this
    machine: the Python driver (``root``) and its descendants, its parent (the driver JVM, kind ``jvm``), the
    executor JVMs of application ``app_id`` (kind ``executor_jvms``) and their descendants (the Python workers,
    kind ``workers``). The master's and the workers' daemons are not sampled."""

    def __init__(self, root: int, app_id: str, interval: float = 0.1) -> None:
        super().__init__(root, interval)
        self.app_id = app_id
        self.peak = {"root": 0, "jvm": 0, "executor_jvms": 0, "workers": 0, "total": 0}

    def _collect(self, now: dict[str, int], table: dict[int, tuple[int, str]]) -> None:
        super()._collect(now, table)
        parent = table.get(self.root, (0, ""))[0]
        if table.get(parent, (0, ""))[1] == "java":
            self._visit(parent, "jvm", now)
        for pid in executor_pids(self.app_id, table):
            self._visit(pid, "executor_jvms", now)
            for child, _ in descendants(pid, table):
                self._visit(child, "workers", now)


def run_measured(command: list[str], env: dict[str, str], timeout: float, log: Path) -> dict[str, Any]:
    """Run a command, sampling its process tree; returns wall seconds, peaks (MB), CPU seconds, return code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        with TreeSampler(proc.pid) as sampler:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
    return {
        "wall_seconds": time.perf_counter() - started,
        "returncode": code,
        "sampled_peak_rss_mb": {k: v / 1024 for k, v in sampler.peak.items()},
        "cpu_seconds": sampler.cpu_seconds,
        "cpu_seconds_by_process": sampler.cpu_by_kind,
        "log": str(log),
    }


# ---------------------------------------------------------------------------------------- versions, machine


def package_version(package: str) -> str:
    """The installed version of a distribution (``"unknown"`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, e.g. ``"1.98 2.08 2.29"``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine(bench_python: Path) -> dict[str, Any]:
    """Cores, memory (GiB), load average, Python, PySpark and pac-synth versions (pac-synth: of ``bench_python``,
    unless ``SPARK_DPSYNTH_BENCH_PYTHON`` names another interpreter)."""
    with open("/proc/meminfo", encoding="utf-8") as f:
        total_kb = int(f.readline().split()[1])
    pacsynth = "not installed"
    bench = Path(os.environ.get("SPARK_DPSYNTH_BENCH_PYTHON", bench_python))
    if bench.exists():
        found = subprocess.run(
            [str(bench), "-c", "from importlib.metadata import version; print(version('pac-synth'))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        pacsynth = found.stdout.strip() or "unknown"
    return {
        "cores": os.cpu_count(),
        "memory_gb": total_kb / 2**20,
        "load_before": load_average(),
        "python": sys.version.split()[0],
        "pyspark": package_version("pyspark"),
        "pacsynth": pacsynth,
    }
