"""NIST's k-marginal score (spark_dpsynth.evaluation.nist): SDNist 2.4's formula by hand on tiny tables, its
bins, its place in ``evaluate``, and equality with SDNist itself on NIST's real files (where SDNist is installed)."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import DataFrame

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation.metrics import evaluate
from spark_dpsynth.evaluation.nist import nist_group_columns, nist_k_marginal, sdnist_density_edges

ROOT = Path(__file__).resolve().parent.parent
SDNIST_PYTHON = ROOT / ".venv-sdnist" / "bin" / "python"

COLUMNS = ("PUMA", "A", "B", "C")
# Two groups a, b; target 6 rows, synthetic 5 rows.
TARGET = [
    ("a", "1", "x", "p"),
    ("a", "1", "y", "p"),
    ("a", "2", "x", "q"),
    ("b", "1", "x", "p"),
    ("b", "2", "y", "q"),
    ("b", "2", "y", "p"),
]
SYNTHETIC = [
    ("a", "1", "x", "p"),
    ("a", "2", "y", "q"),
    ("b", "1", "x", "p"),
    ("b", "1", "x", "p"),
    ("b", "2", "x", "q"),
]


def table(spark, rows, columns=COLUMNS) -> DataFrame:
    return spark.createDataFrame(rows, schema=", ".join(f"{c} string" for c in columns)).coalesce(1)


def test_grouped_score_by_hand(spark):
    # Sums of |t - s| over the cells PUMA x pair, in 30ths (t = count / 6, s = count / 5):
    #   (A,B): a: 1 + 5 + 5 + 6 = 17, b: 7 + 10 + 6 = 23 -> 40
    #   (A,C): a: 4 + 1 = 5,          b: 7 + 1 + 5 = 13 -> 18
    #   (B,C): a: 1 + 5 + 5 + 6 = 17, b: 7 + 5 + 5 + 6 = 23 -> 40
    # score = (2 - mean) * 500 = (2 - 98 / 90) * 500 = 455.55...
    # per group (n_g / n = 15/30, the cap): a: min(17, 15) / 15 = 1, 5 / 15 = 1/3, 1 -> 1000 (1 - 7/9) = 222.2...
    #                                       b: 1, 13 / 15, 1 -> 1000 (1 - 43/45) = 44.4...
    got = nist_k_marginal(table(spark, TARGET), table(spark, SYNTHETIC))
    assert got["score"] == pytest.approx((2 - 98 / 90) * 500, abs=1e-9)
    assert got["score_by_group"] == {
        "a": pytest.approx(1000 * 2 / 9, abs=1e-9),
        "b": pytest.approx(1000 * 2 / 45, abs=1e-9),
    }
    assert got["group_columns"] == ["PUMA"] and got["columns"] == ["A", "B", "C"] and got["pairs"] == 3


def test_ungrouped_score_by_hand(spark):
    # Without groups, 2-way marginals alone, in 30ths: (A,B) 8 + 5 + 1 + 4 = 18, (A,C) 3 + 2 + 5 = 10,
    # (B,C) 8 + 10 + 1 + 1 = 20; score = (2 - 48 / 90) * 500 = 733.3...
    got = nist_k_marginal(table(spark, TARGET), table(spark, SYNTHETIC), ())
    assert got["score"] == pytest.approx((2 - 48 / 90) * 500, abs=1e-9)
    assert got["score_by_group"] == {}
    # PUMA is never a pair column, grouped or not
    assert got["columns"] == ["A", "B", "C"]


def test_the_same_whatever_the_partitioning_and_the_spelling_of_codes(spark):
    once = nist_k_marginal(table(spark, TARGET), table(spark, SYNTHETIC))
    # synthetic codes as integers and as "1.0": SDNist reads codes as numbers (pandas.to_numeric)
    spelled = [(g, f"{a}.0", b, c) for g, a, b, c in SYNTHETIC]
    again = nist_k_marginal(table(spark, TARGET).repartition(3), table(spark, spelled).repartition(2))
    assert again == once


def test_percentile_bins_and_the_empty_value_by_hand(spark):
    # AGEP (SDNist's percentile column): target ranks of 1, 2, 3, 4 among 4 -> shares .25 .5 .75 1 -> bins
    # 5, 10, 15, 19; "N" -> -1. Synthetic cut at the target's bin tops (1, 2, 3, then "above 3"): 2 -> 10,
    # 3 -> 15, 5 -> 19; 0 is below the first bin's range and SDNist, having no bin 0, leaves it as 0.
    # Cells (one column: its 1-way marginal) per 1/5: target {5, 10, 15, 19, -1}, synthetic {0, 10, 15, 19, -1}:
    # sum |t - s| = 2/5 -> score (2 - .4) * 500 = 800.
    target = [("g", "1"), ("g", "2"), ("g", "3"), ("g", "4"), ("g", "N")]
    synthetic = [("g", "0"), ("g", "2"), ("g", "3"), ("g", "5"), ("g", "N")]
    got = nist_k_marginal(table(spark, target, ("PUMA", "AGEP")), table(spark, synthetic, ("PUMA", "AGEP")))
    assert got["binning"] == {"PUMA": "codes", "AGEP": "percentile"}
    assert got["pairs"] == 1
    assert got["score"] == pytest.approx(800.0, abs=1e-9)
    # the same column not binned: the values themselves, 3 of 5 shared -> sum |t - s| = 4/5 -> 600
    plain = nist_k_marginal(
        table(spark, target, ("PUMA", "AGEP")),
        table(spark, synthetic, ("PUMA", "AGEP")),
        percentile_columns=(),
    )
    assert plain["score"] == pytest.approx(600.0, abs=1e-9)


def test_density_edges_are_sdnists():
    # SDNist's bin_density: [0, 150] + 20-bin log grid from 10 to 52864.7 + 500, from its 9th edge on
    edges = sdnist_density_edges()
    assert len(edges) == 15 and edges[:2] == [0.0, 150.0] and edges[-1] == pytest.approx(53364.7)
    assert edges[2] == pytest.approx(10 ** (1 + 8 * (math.log10(53364.7) - 1) / 20), rel=1e-12)


def test_parameters_checked_before_any_data_is_read(spark):
    t = table(spark, TARGET)
    with pytest.raises(SchemaError, match="not columns"):
        nist_k_marginal(t, t, ("REGION",))
    with pytest.raises(InvalidParameterError, match="got a string"):
        nist_k_marginal(t, t, "PUMA")
    with pytest.raises(SchemaError, match="lacks"):
        nist_k_marginal(t, t.drop("C"))
    assert nist_group_columns(("A", "B"), None) is None  # no PUMA, none named: no NIST figure
    assert nist_group_columns(("PUMA", "A"), None) == ("PUMA",)
    # nothing left to pair
    assert (
        nist_k_marginal(
            table(spark, [("a", "3")], ("PUMA", "INDP")), table(spark, [("a", "3")], ("PUMA", "INDP"))
        )
        is None
    )


def test_evaluate_reports_nists_figure_only_with_a_group(spark):
    s, y = table(spark, TARGET), table(spark, SYNTHETIC)
    m = evaluate(s, y, max_marginal_length=3)
    assert m["nist_k_marginal_score"] == pytest.approx((2 - 98 / 90) * 500, abs=1e-9)
    assert m["nist_k_marginal"]["group_columns"] == ["PUMA"] and "score" not in m["nist_k_marginal"]
    assert m["k_marginal_score"] == pytest.approx(1000 * (1 - m["tvd"]["3"]["mean"]))
    renamed = [("Q" if c == "PUMA" else c) for c in COLUMNS]
    s2, y2 = table(spark, TARGET, renamed), table(spark, SYNTHETIC, renamed)
    assert evaluate(s2, y2, max_marginal_length=2)["nist_k_marginal_score"] is None
    named = evaluate(s2, y2, max_marginal_length=2, nist_group_columns=["Q"])
    assert named["nist_k_marginal_score"] == pytest.approx(m["nist_k_marginal_score"], abs=1e-9)
    with pytest.raises(SchemaError, match="nist_group_columns"):
        evaluate(s2, y2, nist_group_columns=["PUMA"])


_SDNIST_SCORE = """
import json, sys
from pathlib import Path
import sdnist.report  # noqa: F401 (SDNist's modules import each other in this order)
from sdnist.load import TestDatasetName
from sdnist.metrics.kmarginal import KMarginal
from sdnist.report.dataset import Dataset
import sdnist.utils as u
d = Dataset(Path(sys.argv[1]), u.SimpleLogger(), TestDatasetName.national2019, Path(sys.argv[2]), False)
groups = d.config["k_marginal"]["group_features"]
k = KMarginal(d.d_target_data, d.d_synthetic_data, groups)
k.compute_score()
print(json.dumps({"score": float(k.score), "groups": groups}))
"""


@pytest.mark.slow
def test_equals_sdnist_on_nists_national_excerpt(spark, shared_data, tmp_path):
    """Our score equals SDNist 2.4's own on NIST's national 2019 excerpt (target) against the national 2018
    excerpt (real records of the same 20 PUMAs a year earlier, standing in for a synthetic table), both real."""
    if not SDNIST_PYTHON.exists():
        pytest.skip("SDNist is not installed (make bench-sdnist-env)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sdnist_report import lay_out_data_root

    root = lay_out_data_root(tmp_path / "data_root", "NATIONAL", shared_data)
    synthetic_csv = tmp_path / "national2018.csv"
    synthetic_csv.write_bytes(gzip.decompress((shared_data / "nist_national2018.csv.gz").read_bytes()))
    done = subprocess.run(
        [str(SDNIST_PYTHON), "-c", _SDNIST_SCORE, str(synthetic_csv), str(root)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert theirs["groups"] == ["PUMA"]

    target = spark.read.csv(str(shared_data / "nist_national2019.csv.gz"), header=True)
    synthetic = spark.read.csv(str(synthetic_csv), header=True, inferSchema=True)  # numbers typed, as written
    ours = nist_k_marginal(target, synthetic)
    assert ours["pairs"] == 231 and len(ours["score_by_group"]) == 20
    assert ours["score"] == pytest.approx(theirs["score"], abs=1.0)
