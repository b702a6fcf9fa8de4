"""A Spark standalone cluster on 127.0.0.1 from the installed PySpark, for the scale benchmark and the cluster test.

The pip package of PySpark ships ``bin/spark-class`` but no ``sbin/start-master.sh``: the master and the workers
are started as ``spark-class`` processes, each in its own process group, and stopped (workers first) when the
context ends, also on errors.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def spark_home() -> Path:
    """The installed PySpark's directory (its ``bin/spark-class`` and ``bin/spark-submit``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_env(base: dict[str, str], logs: Path) -> dict[str, str]:
    """``base`` plus what the cluster processes need: SPARK_HOME, the loopback address, the log directory."""
    return {
        **base,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(logs),
    }


def _wait_for(log: Path, text: str, count: int, timeout: float, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a cluster process exited: {dead}; see {log}")
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} x{count} not in {log} after {timeout} s")


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop the processes started here (each its own process group), workers first."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@contextmanager
def standalone_cluster(
    work: Path, env: dict[str, str], workers: int = 2, worker_memory: str = "2g"
) -> Iterator[str]:
    """A master and ``workers`` 1-core workers on 127.0.0.1; yields the master URL ``spark://127.0.0.1:PORT``.

    Logs go to ``work/cluster-logs`` (``master.log``, ``worker{i}.log``), worker i's directory (its executors'
    stdout/stderr under ``app-*/``) is ``work/cluster-work{i}``. ``env``: the processes' environment (see
    :func:`cluster_env`).
    """
    spark_class = str(spark_home() / "bin" / "spark-class")
    logs = work / "cluster-logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )
            )  # fmt: skip
        _wait_for(master_log, "I have been elected leader", 1, 120, procs)
        for i in range(workers):
            with open(logs / f"worker{i}.log", "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", "1", "--memory", worker_memory, "--webui-port", str(free_port()),
                         "--work-dir", str(work / f"cluster-work{i}"), url],
                        stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                    )
                )  # fmt: skip
        _wait_for(master_log, "Registering worker 127.0.0.1", workers, 120, procs)
        yield url
    finally:
        _stop(procs)


def package_zip(directory: Path) -> Path:
    """spark_dpsynth as ``directory/spark_dpsynth.zip`` for ``--py-files`` (what the README tells users to ship,
    as ``make dist`` builds it: every module of the package and its subpackages)."""
    path = directory / "spark_dpsynth.zip"
    package = ROOT / "spark_dpsynth"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted(package.rglob("*.py")) + [package / "py.typed"]:
            z.write(f, str(f.relative_to(ROOT)))
    return path
