"""Answers from the release (spark_dpsynth.synthesizers.query, docs/design.md section 4.8): count queries parsed
by Spark, answered from the fitted model with standard errors, on a small measured release; and on UCI Adult,
the standard errors' coverage of the true counts and the answers' accuracy against a sampled synthetic table."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.release import Release
from spark_dpsynth.synthesizers import query as q
from tests.conftest import ROOT

# A small release measured (almost) without noise: sex in {F, M, empty}, age binned [18, 30), [30, 50), [50, 80]
# (integers), region in {N, S, empty}; (sex, age) measured together, region alone. Every cell holds records, so
# no cell is judged absent and the model's domain is the release's.
SEX_AGE = np.array(
    [
        [100.0, 200.0, 150.0, 10.0],
        [120.0, 180.0, 190.0, 10.0],
        [10.0, 10.0, 10.0, 10.0],
    ]
)
REGION = np.array([600.0, 400.0, 20.0])
N = float(SEX_AGE.sum())  # 1020


def small_release(*, measured: bool = True) -> Release:
    aggregates = pd.DataFrame(
        {
            "k": [1] * 7,
            "columns": [["sex"], ["sex"], ["age"], ["age"], ["age"], ["region"], ["region"]],
            "values": [["F"], ["M"], ["<30"], ["[30, 50)"], [">=50"], ["N"], ["S"]],
            "count": [460, 500, 230, 390, 350, 600, 400],
        }
    )
    age_bins = {
        "edges": [30.0, 50.0],
        "labels": ["<30", "[30, 50)", ">=50"],
        "lower": 18.0,
        "upper": 80.0,
        "integral": False,
        "passthrough": [],
        "point_labels": [],
        "points": [],
        "shape": [],
    }
    manifest = {
        "columns": ["sex", "age", "region"],
        "mechanism": "workload",
        "synthesizers": ["pgm"],
        "reporting_length": 2,
        "protected_number_of_records": int(N),
        "epsilon": 1.0,
        "delta": 1e-6,
        "test_mode": True,
        "column_types": {
            "sex": {"scale": "category", "type": "string", "nullable": True},
            "age": {"scale": "integer", "type": "int", "nullable": True, "bins": age_bins},
            "region": {"scale": "category", "type": "string", "nullable": True},
        },
    }
    base = Release.from_pandas(aggregates, manifest)
    measurements = (
        Measurement(("sex", "age"), SEX_AGE, 1.0),
        Measurement(("region",), REGION, 1.0),
    )
    return Release(
        base.columns,
        base.domains,
        base.marginals,
        base.manifest,
        measurements=measurements if measured else (),
    )


@pytest.fixture(scope="module")
def answers() -> q.ReleaseAnswers:
    return q.ReleaseAnswers(small_release(), replicates=4, iterations=20)


# ------------------------------------------------------------------------------------------ the lexical scan


def test_count_calls_finds_the_counts_and_skips_strings_and_comments() -> None:
    sql = (
        "SELECT sex, COUNT(*) AS n, count( 1 ) AS m FROM t WHERE sex <> 'count(*)' -- count(*)\nGROUP BY sex"
    )
    spans = q.count_calls(sql)
    assert [sql[a:b].lower().replace(" ", "") for a, b in spans] == ["count(*)", "count(1)"]


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("SELECT sum(age) AS s FROM t", "sum"),
        ("SELECT avg(age), count(*) FROM t", "avg"),
        ("SELECT count(age) FROM t", "count of a column"),
        ("SELECT count(DISTINCT sex) FROM t", "count of a column"),
        ("SELECT sex, count(*) OVER (PARTITION BY sex) FROM t", "window"),
        ("SELECT sex, count(*) AS n FROM t GROUP BY sex LIMIT 1", "LIMIT"),
    ],
)
def test_count_calls_refuses_what_is_not_a_count(sql: str, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        q.count_calls(sql)


# ------------------------------------------------------------------------------------------------ queries


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("", "non-empty"),
        ("SELECT sex FROM t", "must count"),
        ("SELEC count(*) FROM t", "does not analyse"),
        ("SELECT count(*) AS n FROM t WHERE income = 'x'", "does not analyse"),
        ("SELECT count(*) + 1 AS n FROM t", "not in an expression"),
        ("SELECT sex, count(*) AS n FROM t GROUP BY sex HAVING count(*) > 5", "not in an expression"),
        ("SELECT count(*) AS n FROM t a JOIN t b ON a.sex = b.sex", "reads t once"),
        ("SELECT sex, max(age), count(*) FROM t GROUP BY sex", "max"),
    ],
)
def test_unsupported_queries_are_refused(spark, answers: q.ReleaseAnswers, sql: str, match: str) -> None:  # noqa: ANN001
    with pytest.raises(InvalidParameterError, match=match):
        answers.query(spark, sql)
    assert not spark.catalog.tableExists("t")  # the view is dropped whatever failed


def test_too_many_columns_are_refused(spark, answers: q.ReleaseAnswers, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(q, "MAX_QUERY_COLUMNS", 1)
    with pytest.raises(InvalidParameterError, match="names 2 of the release's columns"):
        answers.query(spark, "SELECT sex, count(*) AS n FROM t WHERE region = 'N' GROUP BY sex")


def test_a_view_of_the_same_name_is_not_replaced(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    spark.range(1).createOrReplaceTempView("mine")
    try:
        with pytest.raises(InvalidParameterError, match="exists"):
            answers.query(spark, "SELECT count(*) AS n FROM mine", view="mine")
    finally:
        spark.catalog.dropTempView("mine")


def test_a_release_without_measured_marginals_is_refused() -> None:
    with pytest.raises(ReleaseError, match="measured marginals"):
        q.ReleaseAnswers(small_release(measured=False))


def test_the_output_schema(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    out = answers.query(spark, "SELECT sex, count(*) AS n, count(1) AS m FROM t WHERE age >= 50 GROUP BY sex")
    assert [(f.name, f.dataType) for f in out.schema.fields] == [
        ("sex", T.StringType()),
        ("n", T.DoubleType()),
        ("n_se", T.DoubleType()),
        ("m", T.DoubleType()),
        ("m_se", T.DoubleType()),
        ("measured_together", T.BooleanType()),
    ]
    rows = {r["sex"]: r for r in out.collect()}
    assert set(rows) == {"F", "M", None}  # the empty category is null
    assert all(r["n"] == r["m"] and r["n_se"] > 0 and r["measured_together"] for r in rows.values())
    typed = answers.query(spark, "SELECT age, count(*) AS n FROM t WHERE age >= 78 GROUP BY age")
    assert typed.schema["age"].dataType == T.IntegerType()  # the input's type, a value inside the bin
    assert sorted(r["age"] for r in typed.collect()) == [78, 79, 80]  # the public upper bound closes the bin


def test_a_query_equals_the_model_marginal(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    """n' times the model's marginal over the query's columns, the bins grouped by an expression on the edges."""
    sql = (
        "SELECT sex, CASE WHEN age < 30 THEN 0 WHEN age < 50 THEN 1 ELSE 2 END AS bin, count(*) AS n "
        "FROM t WHERE age IS NOT NULL GROUP BY 1, 2"
    )
    got = {(r["sex"], r["bin"]): r["n"] for r in answers.query(spark, sql).collect()}
    marginal = answers.model.project(("sex", "age")) / answers.model.total * N
    sexes = [*answers.release.domains[0], None]
    bins = {"<30": 0, "[30, 50)": 1, ">=50": 2}
    ages = [bins[label] for label in answers.release.domains[1]]  # the release's order of the bins
    want = {(sexes[i], ages[j]): marginal[i, j] for i in range(3) for j in range(3)}
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9)
    # and the model follows its (almost noiseless) measurement, whose columns are in the release's order
    assert got[("M", 2)] == pytest.approx(SEX_AGE[1, answers.release.domains[1].index(">=50")], rel=0.03)


def test_a_cut_inside_a_bin_takes_the_bins_uniform_share(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    """age >= 40 holds 10 of the 20 whole numbers of [30, 50) and the whole bin [50, 80]."""
    got = answers.query(spark, "SELECT count(*) AS n FROM t WHERE age >= 40").collect()[0]["n"]
    marginal = dict(
        zip(
            answers.release.domains[1],
            answers.model.project(("age",)) / answers.model.total * N,
            strict=False,
        )
    )
    assert got == pytest.approx(marginal["[30, 50)"] * 10 / 20 + marginal[">=50"], rel=1e-9)


def test_a_count_without_columns_is_the_protected_number_of_records(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    row = answers.query(spark, "SELECT count(*) AS n FROM t").collect()[0]
    assert row["n"] == pytest.approx(N)
    # the model's probabilities sum to 1 in every replicate: only n''s noise is left (epsilon_N unknown here: 0)
    assert row["n_se"] == pytest.approx(0.0, abs=1e-6)
    assert row["measured_together"]


def test_columns_never_measured_together_say_so_and_widen(spark, answers: q.ReleaseAnswers, caplog) -> None:  # noqa: ANN001
    together = answers.query(spark, "SELECT sex, count(*) AS n FROM t GROUP BY sex").collect()
    apart = answers.query(spark, "SELECT sex, region, count(*) AS n FROM t GROUP BY sex, region").collect()
    assert all(r["measured_together"] for r in together)
    assert not any(r["measured_together"] for r in apart)
    assert "never measured together" in caplog.text
    assert answers.model_error >= 0.0
    boot = answers.bootstrap
    p, reps = boot.shares(("sex", "region"))
    for r in apart:
        i = [*answers.release.domains[0], None].index(r["sex"])
        j = [*answers.release.domains[2], None].index(r["region"])
        noise = max(N * N * float(np.var(reps[:, i, j], ddof=1)), answers.noise_floor(("sex", "region")))
        assert r["n_se"] ** 2 == pytest.approx(noise + (answers.model_error * N * p[i, j]) ** 2, rel=1e-6)
    # the floor: no clique holds sex and region, the one within them is region's table (std 1); (sex, age) holds sex
    assert answers.noise_floor(("sex", "region")) == pytest.approx(1.0)
    assert answers.noise_floor(("sex",)) == pytest.approx(1.0)
    assert answers.noise_floor(()) == 0.0


def test_the_standard_errors_are_the_bootstraps_spread(spark, answers: q.ReleaseAnswers) -> None:  # noqa: ANN001
    rows = answers.query(spark, "SELECT sex, count(*) AS n FROM t GROUP BY sex").collect()
    _, reps = answers.bootstrap.shares(("sex",))
    for r in rows:
        i = [*answers.release.domains[0], None].index(r["sex"])
        spread = N * N * float(np.var(reps[:, i], ddof=1))
        assert r["n_se"] == pytest.approx(math.sqrt(max(spread, answers.noise_floor(("sex",)))), rel=1e-9)
    # the seed makes them reproducible
    again = q.ReleaseAnswers(small_release(), replicates=4, iterations=20)
    assert np.array_equal(again.bootstrap.shares(("sex",))[1], reps)


def test_release_query_and_the_command_line(spark, tmp_path, capsys) -> None:  # noqa: ANN001
    from spark_dpsynth.cli.main import main
    from spark_dpsynth.pipeline import load

    release = small_release()
    release.save(str(tmp_path / "release"), spark)
    loaded = load(str(tmp_path / "release"), spark)
    sql = "SELECT sex, count(*) AS n FROM t WHERE age >= 30 GROUP BY sex"
    by_method = {r["sex"]: r["n"] for r in loaded.query(sql, replicates=4).collect()}
    assert main(["query", "--release", str(tmp_path / "release"), "--sql", sql]) == 0
    printed = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out), keep_default_na=False)
    assert list(printed.columns) == ["sex", "n", "n_se", "measured_together"]
    for _, row in printed.iterrows():
        assert row["n"] == pytest.approx(by_method[row["sex"] or None], rel=1e-9)
    assert main(["query", "--release", str(tmp_path / "release"), "--sql", "SELECT sum(age) FROM t"]) == 2
    assert "sum" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- UCI Adult: coverage


def _bin_expression(column: str, types: dict) -> str:  # noqa: ANN401
    """A binned column's bin number as SQL (the answers then group whole bins), else the column itself."""
    t = types.get(column) or {}
    bins = t.get("bins")
    if not bins or t.get("scale") == "category":
        return column
    cases = " ".join(f"WHEN {column} < {e} THEN {i}" for i, e in enumerate(bins["edges"]))
    return f"CASE WHEN {column} IS NULL THEN NULL {cases} ELSE {len(bins['edges'])} END"


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
@pytest.mark.long
def test_adult_counts_are_covered_and_beat_a_synthetic_table(spark, adult_release, epsilon: float) -> None:  # noqa: ANN001
    """On 30 random 2- and 3-way count queries of Adult (its train split, conf/adult.toml; the session's fit), the
    true count lies within 2 standard errors of the answer for at least 90% of the cells with at least 20 records,
    and the answers are at least as close (mean absolute error) as counting a synthetic table of the release's
    size. The real table is read only to check (the same SQL over it)."""
    release = adult_release(epsilon)
    columns = list(release.release.columns)
    df = spark.read.csv(str(ROOT / "data" / "adult.csv.gz"), header=True, inferSchema=True)
    text = {f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType)}
    real = df.where("split = 'train'").select(
        [
            F.when(F.col(c) == "?", None).otherwise(F.col(c)).alias(c) if c in text else F.col(c)
            for c in columns
        ]
    )
    # Both tables are counted 30 times: held once (the synthetic one is otherwise drawn again by each count).
    real, synthetic = real.cache(), release.sample(seed=3).cache()
    try:
        types = dict(release.manifest.get("column_types") or {})
        rng = random.Random(5)
        inside = cells = 0
        error_answer, error_synthetic = [], []
        for _ in range(30):
            chosen = rng.sample(columns, rng.choice([2, 3]))
            keys = [f"g{i}" for i in range(len(chosen))]
            select = ", ".join(
                f"CAST({_bin_expression(c, types)} AS STRING) AS {k}"
                for c, k in zip(chosen, keys, strict=True)
            )
            sql = f"SELECT {select}, count(*) AS n FROM t GROUP BY {', '.join(keys)}"
            answered = release.query(sql).toPandas()
            counted = {}
            for name, table in (("true", real), ("synthetic", synthetic)):
                table.createOrReplaceTempView("t")
                try:
                    counted[name] = table.sparkSession.sql(sql).toPandas()  # one row per group of the query
                finally:
                    spark.catalog.dropTempView("t")
            merged = counted["true"].merge(answered, on=keys, how="left", suffixes=("_true", ""))
            merged = merged.merge(counted["synthetic"].rename(columns={"n": "n_syn"}), on=keys, how="left")
            merged = merged.fillna({"n": 0.0, "n_se": 0.0, "n_syn": 0.0})
            big = merged[merged["n_true"] >= 20]
            inside += int((np.abs(big["n_true"] - big["n"]) <= 2 * big["n_se"]).sum())
            cells += len(big)
            error_answer += list(np.abs(big["n_true"] - big["n"]))
            error_synthetic += list(np.abs(big["n_true"] - big["n_syn"]))
    finally:
        real.unpersist()
        synthetic.unpersist()
    assert cells > 300
    assert inside / cells >= 0.9, f"coverage {inside / cells:.3f} of {cells} cells"
    assert float(np.mean(error_answer)) <= float(np.mean(error_synthetic)), (
        f"MAE {np.mean(error_answer):.2f} vs the synthetic table's {np.mean(error_synthetic):.2f}"
    )
    assert math.isfinite(float(np.mean(error_answer)))
