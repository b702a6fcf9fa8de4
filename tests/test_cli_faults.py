"""The command line under faults and misuse: options that reach the right key, signals at every stage, and Spark's
failures in our words (docs/design.md sections 1.6 and 7). No message may carry a data value.

The signal tests run the real pipeline on UCI Adult in a process group of its own and send the signal to the
whole group (what Ctrl-C, ``timeout`` and a scheduler send) once the progress line of a stage shows; they are in
the ``slow`` tier.
"""

from __future__ import annotations

import logging
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
