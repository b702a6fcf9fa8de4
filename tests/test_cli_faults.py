"""The command line under faults and misuse: options that reach the right key, signals at every stage, and Spark's
failures in our words (docs/design.md sections 1.6 and 7). No message may carry a data value.

The signal tests run the real pipeline on UCI Adult in a process group of its own and send the signal to the
whole group (what Ctrl-C, ``timeout`` and a scheduler send) once the progress line of a stage shows; they are in
the ``slow`` tier.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_dpsynth.cli.config import load_document, parse_config
from spark_dpsynth.cli.main import build_parser, load_job_config
from spark_dpsynth.errors import ConfigError
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")


# --------------------------------------------------------------------------------------------- --encoding


@pytest.mark.parametrize("command", ["pipeline", "aggregate", "evaluate"])
@pytest.mark.parametrize(("given", "canonical"), [("latin-1", "iso-8859-1"), ("utf-8", "utf-8")])
def test_encoding_is_the_csv_encoding_on_every_command_that_reads_a_table(
    command: str, given: str, canonical: str
) -> None:
    args = build_parser().parse_args([command, "--input", ADULT, "--output", "o", "--encoding", given])
    config = load_job_config(args)
    assert config.encoding == canonical
    assert config.archetype.cluster_encoding == "onehot"


def test_cluster_encoding_is_the_archetype_option() -> None:
    args = build_parser().parse_args(
        [
            "pipeline",
            "--input",
            ADULT,
            "--output",
            "o",
            "--encoding",
            "latin-1",
            "--cluster-encoding",
            "ordinal",
        ]
    )
    config = load_job_config(args)
    assert config.encoding == "iso-8859-1" and config.archetype.cluster_encoding == "ordinal"


def test_the_old_archetype_key_is_read_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[input]\nencoding = "latin-1"\n[archetype]\nencoding = "ordinal"\n')
    with caplog.at_level(logging.WARNING, logger="spark_dpsynth.cli.config"):
        config = parse_config(load_document(str(conf)))
    assert config.encoding == "iso-8859-1" and config.archetype.cluster_encoding == "ordinal"
    assert [r.getMessage() for r in caplog.records] == [
        "[archetype] encoding is deprecated: call it cluster_encoding (option --cluster-encoding)"
    ]


def test_the_old_and_the_new_archetype_key_together_are_refused(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[archetype]\nencoding = "ordinal"\ncluster_encoding = "onehot"\n')
    with pytest.raises(ConfigError, match=r"^\[archetype\] give cluster_encoding only \(encoding is its"):
        parse_config(load_document(str(conf)))
    conf.write_text('[archetype]\nencoding = "hash"\n')
    with pytest.raises(
        ConfigError, match=r"cluster_encoding must be one of \['onehot', 'ordinal'\], got 'hash'"
    ):
        parse_config(load_document(str(conf)))


# --------------------------------------------------------------------------------------------- signals

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING) spark_dpsynth\.")
_JVM_START = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use",
)
"""The lines a JVM prints when it starts, before any stage (PySpark's and the JDK's, no data)."""


def _run_until(marker: str, signum: int, *, group: bool, out: Path) -> tuple[int, list[str], bool]:
    """Run the pipeline on Adult, send ``signum`` (to the process group or the process) a moment after a progress
    line containing ``marker``; returns the exit status, the stderr lines that are not progress or JVM start-up
    lines, and whether the signal was sent."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_dpsynth", "pipeline", "--input", ADULT, "--output", str(out),
         "--use-columns", "age,workclass,education,sex,race,income", "--epsilon", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    sent = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if not sent.is_set() and marker in line:
                time.sleep(0.5)
                (os.killpg if group else os.kill)(proc.pid, signum)
                sent.set()

    reader = threading.Thread(target=watch)
    reader.start()
    try:
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join()
    rest = [x for x in lines if not _LOG_LINE.match(x) and not x.startswith(_JVM_START)]
    return proc.returncode, rest, sent.is_set()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("marker", "signum", "group", "status"),
    [
        ("workload: discovering", signal.SIGINT, True, 130),
        ("workload: discovering", signal.SIGTERM, True, 143),
        ("workload: discovering", signal.SIGTERM, False, 143),
        ("pgm: sampling", signal.SIGTERM, True, 143),
        ("pgm: sampling", signal.SIGINT, True, 130),
        ("cell counts and metrics", signal.SIGINT, True, 130),
        ("cell counts and metrics", signal.SIGTERM, True, 143),
    ],
    ids=[
        "aggregation-SIGINT-group", "aggregation-SIGTERM-group", "aggregation-SIGTERM-process",
        "synthesis-SIGTERM-group", "synthesis-SIGINT-group", "evaluation-SIGINT-group", "evaluation-SIGTERM-group",
    ],
)  # fmt: skip
def test_a_signal_at_any_stage_exits_with_one_line(
    marker: str, signum: int, group: bool, status: int, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    code, rest, sent = _run_until(marker, signum, group=group, out=out)
    assert sent, f"the run ended before a progress line said {marker!r}"
    name = signal.Signals(signum).name
    assert code == status
    assert rest == [f"spark-dpsynth: interrupted by {name}; no output was changed"], "\n".join(rest[:20])
    assert not any("Exception" in x or "at org.apache" in x or "Traceback" in x for x in rest)
    assert not out.exists() or not [p.name for p in out.iterdir() if not p.name.startswith(".")], "no output"
