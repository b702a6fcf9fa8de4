"""The pgm synthesizer (docs/design.md section 4.8): a graphical model fitted to measured marginals, sampled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth import registry
from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release import Release
from spark_dpsynth.release.core import one_way_means
from spark_dpsynth.synthesizers import pgm


def measurement_of(columns, values, std, mask=None) -> Measurement:  # noqa: ANN001
    """A measurement over the columns A, B, C by index."""
    return Measurement(tuple("ABC"[c] for c in columns), values, std, mask)


# The true joint of (A, B) over the measurement domain: A in {a, b, empty}, B in {x, y, z, empty}; C in {u, empty}
# is independent of both. Rows: A; columns: B.
JOINT_AB = np.array(
    [
        [300.0, 100.0, 0.0, 100.0],
        [0.0, 200.0, 150.0, 50.0],
        [50.0, 0.0, 50.0, 0.0],
    ]
)
C_SHARES = np.array([0.75, 0.25])


def measured_release(
    *, measured: bool = True, protected_n: int = 1000, budget: dict | None = None
) -> Release:
    aggregates = pd.DataFrame(
        {
            "k": [1] * 6,
            "columns": [["A"], ["A"], ["B"], ["B"], ["B"], ["C"]],
            "values": [["a"], ["b"], ["x"], ["y"], ["z"], ["u"]],
            "count": [500, 400, 350, 300, 200, 750],
        }
    )
    n = JOINT_AB.sum()  # 1000
    manifest = {
        "columns": ["A", "B", "C"],
        "mechanism": "workload",
        "synthesizers": ["pgm"],
        "reporting_length": 1,
        "protected_number_of_records": protected_n,
        "epsilon": 1.0,
        "delta": 1e-6,
        "test_mode": True,
    }
    if budget is not None:
        manifest["budget"] = budget
    base = Release.from_pandas(aggregates, manifest)
    measurements = (
        measurement_of(columns=(0, 1), values=JOINT_AB + 0.5, std=1.0),  # small "noise": a constant offset
        measurement_of(columns=(2,), values=C_SHARES * n, std=2.0),
        measurement_of(columns=(0,), values=JOINT_AB.sum(axis=1), std=2.0),
    )
    return Release(
        base.columns,
        base.domains,
        base.marginals,
        base.manifest,
        measurements=measurements if measured else (),
    )


def test_the_release_resolves_to_pgm() -> None:
    release = measured_release()
    assert registry.resolve_synthesizer(release.manifest).name == "pgm"
    domain = pgm.release_domain(release)
    assert domain.sizes == (3, 4, 2)
    model = pgm.fit_release(release, iterations=300)
    np.testing.assert_allclose(model.project(("A", "B")) / model.total, JOINT_AB / JOINT_AB.sum(), atol=2e-3)


def test_pgm_end_to_end(spark) -> None:  # noqa: ANN001
    release = measured_release()
    spec = registry.synthesizer("pgm")
    params = SynthesisParams(target_number_of_records=20_000, partitions=3, seed=5)
    messages: list[str] = []
    out = spec.synthesize(release, params, spark, progress=messages.append)
    assert out.columns == ["A", "B", "C"]
    assert out.rdd.getNumPartitions() == 3
    pdf = out.toPandas()
    assert len(pdf) == 20_000
    assert any(m.startswith("pgm: fitted") for m in messages)
    filled = pdf.fillna("<empty>")
    shares = filled.groupby(["A", "B"]).size() / len(pdf)
    expected = JOINT_AB / JOINT_AB.sum()
    labels_a, labels_b = ["a", "b", "<empty>"], ["x", "y", "z", "<empty>"]
    for i, a in enumerate(labels_a):
        for j, b in enumerate(labels_b):
            # systematic per-partition sampling: each cell within a few records of 20,000 x its share, plus
            # the fit's error (measured cells are off by 0.5 of 1,000); 0.005 is 100 records
            assert shares.get((a, b), 0.0) == pytest.approx(expected[i, j], abs=0.005), (a, b)
    assert filled["C"].value_counts(normalize=True)["u"] == pytest.approx(0.75, abs=0.005)
    assert set(pdf["B"].dropna()) <= {"x", "y", "z"} and pdf["B"].isna().any()
    again = spec.synthesize(release, params, spark).toPandas()
    pd.testing.assert_frame_equal(pdf, again)
    default = spec.synthesize(release, SynthesisParams(partitions=2, seed=1), spark).count()
    assert default == 1000  # the protected number of records


def test_the_number_of_records_is_the_inverse_variance_mean_of_n_and_the_tables_sums(spark) -> None:  # noqa: ANN001
    # n' = 1,300 drawn with epsilon_N = 0.01 (std 141) and three whole tables summing to about 1,000 (std 3.5
    # together): N is their inverse-variance mean, about T; without n''s epsilon (an SDS file), n' alone
    budget = {
        "accounting": "classic",
        "epsilon": 1.0,
        "delta": 1e-6,
        "rho": 0.01,
        "shares": [
            {"name": "number_of_records", "epsilon": 0.01, "delta": None, "rho": None, "mechanism": "x"}
        ],
    }
    release = measured_release(protected_n=1300, budget=budget)
    measurements = pgm.release_measurements(release)
    var_n = pgm.protected_records_variance(release)
    q = np.exp(-0.01)
    assert var_n == pytest.approx(2 * q / (1 - q) ** 2)
    weights = np.array([1.0 / (m.values.size * m.std**2) for m in measurements])
    sums = np.array([m.values.sum() for m in measurements])
    total, var_total = float(weights @ sums / weights.sum()), 1.0 / float(weights.sum())
    n, var = pgm.number_of_records(release, measurements)
    assert var == pytest.approx(1.0 / (1.0 / var_n + 1.0 / var_total))
    assert n == pytest.approx((1300 / var_n + total / var_total) * var)
    assert abs(n - total) < 1.0 and abs(n - 1300) > 290
    # the synthetic table's default size, and a count of every record from the release
    assert pgm.sample(release, SynthesisParams(partitions=2, seed=1), spark).count() == round(n)
    assert pgm.number_of_records(measured_release(protected_n=1300), measurements) == (1300.0, 0.0)


def test_the_rows_do_not_depend_on_the_partitions(spark, monkeypatch) -> None:  # noqa: ANN001
    """Blocks of BLOCK_ROWS records, each from its own generator: 1, 2, 3 or 7 partitions (two of them empty)
    give the same rows in the same order; each block is drawn systematically."""
    monkeypatch.setattr(pgm, "BLOCK_ROWS", 1_000)
    release = measured_release()
    frames = [
        pgm.sample(
            release, SynthesisParams(target_number_of_records=5_500, partitions=p, seed=9), spark
        ).toPandas()
        for p in (1, 2, 3, 7)
    ]
    assert len(frames[0]) == 5_500
    for other in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], other)
    first = frames[0].iloc[:1_000].fillna("<empty>")
    counts = first.groupby(["A", "B"]).size()
    fitted = pgm.fit_release(release)
    expected = fitted.project(("A", "B")) / fitted.total * 1_000
    # within one block, each (A, B) cell within a couple of records of its expected count
    labels_a, labels_b = ["a", "b", "<empty>"], ["x", "y", "z", "<empty>"]
    for i, a in enumerate(labels_a):
        for j, b in enumerate(labels_b):
            assert abs(counts.get((a, b), 0) - expected[i, j]) <= 2.5, (a, b)


def test_a_release_without_measurements_is_refused(spark) -> None:  # noqa: ANN001
    release = measured_release(measured=False)
    with pytest.raises(ReleaseError, match="samples releases with measured marginals"):
        pgm.sample(release, SynthesisParams(), spark)
    with pytest.raises(InvalidParameterError, match="SynthesisParams"):
        pgm.sample(measured_release(), object(), spark)  # type: ignore[arg-type]


def test_a_column_measured_without_empties_gets_none(spark) -> None:  # noqa: ANN001
    """C's 1-way empty cell is 1.5 with std 2 (below 3 stds): no synthetic C is empty, and A's and B's joint is
    still the measured one (conditioning on C, independent of A and B, leaves it unchanged)."""
    base = measured_release()
    n = JOINT_AB.sum()
    c_tables = (measurement_of(columns=(2,), values=np.array([n - 1.5, 1.5]), std=2.0),)
    release = Release(
        base.columns,
        base.domains,
        base.marginals,
        base.manifest,
        measurements=(base.measurements[0], *c_tables, base.measurements[2]),
    )
    np.testing.assert_array_equal(pgm.absent_cells(release)[2], [False, True])  # C's empty cell only
    assert pgm.absent_cells(base) == {}  # A's empty cell is 100 with std 2; B has no 1-way table
    messages: list[str] = []
    params = SynthesisParams(target_number_of_records=5_000, partitions=2, seed=3)
    pdf = pgm.sample(release, params, spark, progress=messages.append).toPandas()
    assert len(pdf) == 5_000 and not pdf["C"].isna().any()
    assert any("1 of 3 columns measured without empty cells" in m for m in messages)
    shares = pdf.fillna("<empty>").groupby(["A", "B"]).size() / len(pdf)
    assert shares.get(("a", "x"), 0.0) == pytest.approx(JOINT_AB[0, 0] / n, abs=0.02)
    assert pdf["A"].isna().mean() == pytest.approx(JOINT_AB[2].sum() / n, abs=0.02)


def test_bins_measured_empty_are_not_drawn() -> None:
    """A binned number column: its bins measured below 3 stds are absent; a category column keeps its cells."""
    base = measured_release()
    manifest = {**dict(base.manifest), "column_types": {"C": {"scale": "integer", "bins": {"edges": [1.0]}}}}
    n = JOINT_AB.sum()
    c_table = measurement_of(columns=(2,), values=np.array([n - 1.0, 1.0]), std=2.0)
    a_table = measurement_of(columns=(0,), values=np.array([n - 101.0, 1.0, 100.0]), std=2.0)
    release = Release(
        base.columns,
        base.domains,
        base.marginals,
        manifest,
        measurements=(base.measurements[0], c_table, a_table),
    )
    absent = pgm.absent_cells(release)
    assert set(absent) == {2}  # A is a category column (its small cell stays); its empty cell is 100
    np.testing.assert_array_equal(absent[2], [False, True])


def test_partial_one_way_tables_count_only_on_their_cells() -> None:
    """A partial 1-way table (the discovery's counts: values measured, empty category not) joins the
    inverse-variance means on its cells only; an empty category no full table measures is never judged absent."""
    base = measured_release()
    n = JOINT_AB.sum()
    a_part = measurement_of(
        columns=(0,), values=np.array([500.0, 400.0, 0.0]), std=1.0, mask=np.array([True, True, False])
    )
    c_part = measurement_of(columns=(2,), values=np.array([n, 0.0]), std=1.0, mask=np.array([True, False]))
    release = Release(
        base.columns,
        base.domains,
        base.marginals,
        base.manifest,
        measurements=(base.measurements[0], base.measurements[2], a_part, c_part),
    )
    means = one_way_means(release.measurements, release.columns)
    a_mean, a_std = means[0]
    full = JOINT_AB.sum(axis=1)  # A's full table, std 2: weight 1/4 beside the partial's 1
    np.testing.assert_allclose(a_mean[:2], (full[:2] / 4 + np.array([500.0, 400.0])) / 1.25)
    assert a_mean[2] == pytest.approx(full[2]) and a_std[2] == pytest.approx(2.0)
    np.testing.assert_allclose(a_std[:2], 1.25**-0.5)
    c_mean, c_std = means[2]
    assert c_mean[1] == 0.0 and np.isinf(c_std[1])
    assert pgm.absent_cells(release) == {}  # C's empty cell is unmeasured, not measured as zero
    measured = pgm.release_measurements(release)
    assert measured[2].mask is not None and measured[2].mask.tolist() == [True, True, False]
    model = pgm.fit_release(release, iterations=200)
    assert model.total == pytest.approx(n, rel=0.01)  # from the whole tables only
    assert model.project(("A",))[0] == pytest.approx(JOINT_AB[0].sum(), abs=5.0)


def with_empty_counts(release: Release, counts: dict[str, int], std: float = 5.0) -> Release:
    """The release with the workload discovery's noisy empty counts in its manifest."""
    manifest = {
        **dict(release.manifest),
        "domain_discovery": {"empty_counts": counts, "empty_counts_noise_std": std},
    }
    return Release(
        release.columns, release.domains, release.marginals, manifest, measurements=release.measurements
    )


def test_the_empty_category_is_decoded_at_the_measured_empty_rate() -> None:
    """A's and B's empty category holds rare unreleased values only (empty counts 0 and 2, std 5: not
    significant): none is written empty, each gets a released value given the record's other columns (A given
    B = x is always a, given z always b: the joint's zero cells stay empty). C's category (250 of 1000) holds 100
    empty cells: empty in 10% of the rows, "u" in the rest."""
    release = with_empty_counts(measured_release(), {"A": 0, "B": 2, "C": 100})
    model = pgm.fit_release(release, iterations=300)
    shares = pgm.rest_empty_shares(release, model)
    assert shares[0] == 0.0 and shares[1] == 0.0
    assert shares[2] == pytest.approx(100 / float(model.project(("C",))[-1]), rel=1e-9)
    assert shares[2] == pytest.approx(0.4, abs=0.01)
    # C's category is (about) all empty cells: 245 of 250 with std 5, the rare values' 5 do not stand out
    assert pgm.rest_empty_shares(with_empty_counts(release, {"C": 245}), model) == {2: 1.0}
    empty = np.array([len(d) for d in release.domains])
    rng = np.random.default_rng(4)
    n = 40_000
    drawn = model.sample(n, rng, rounded=True)
    out = pgm._decode(drawn, empty, model, shares, rng)
    assert (out[:, :2] >= 0).all() and (out[:, :2] < empty[:2]).all()  # no empty A or B, released codes only
    assert (out[:, 2] == -1).mean() == pytest.approx(
        0.10, abs=0.005
    )  # systematic: within one record per block
    assert (out[:, 2] == 0).mean() == pytest.approx(0.90, abs=0.005)
    kept = drawn[:, 0] < empty[0]
    np.testing.assert_array_equal(out[kept, 0], drawn[kept, 0])  # released values are left as drawn
    joint = np.zeros((2, 3))
    np.add.at(joint, (out[:, 0], out[:, 1]), 1.0 / n)
    # the true joint with A's and B's rare values folded into the released values by the conditionals:
    # A's rest (x 50, z 50) -> (a, x), (b, z); B's rest given A: a (100) -> x .75, y .25; b (50) -> y 4/7, z 3/7
    want = np.array([[300 + 50 + 75, 100 + 25, 0], [0, 200 + 50 * 4 / 7, 150 + 50 + 50 * 3 / 7]]) / 1000
    np.testing.assert_allclose(joint, want, atol=0.01)
    # (at atol 0.01 this rejects the column's 1-way shares in place of the conditional: (a, z) would be .028)


def test_a_significant_empty_count_keeps_the_empty_category() -> None:
    """C's 1-way empty cell (1.5, std 2) is below 3 stds, but its measured empty count (40, std 5) stands out:
    its empty category is kept (not conditioned away); A's empty count 10 (std 5) does not stand out."""
    base = measured_release()
    n = JOINT_AB.sum()
    c_table = measurement_of(columns=(2,), values=np.array([n - 1.5, 1.5]), std=2.0)
    plain = Release(
        base.columns, base.domains, base.marginals, base.manifest,
        measurements=(base.measurements[0], c_table, base.measurements[2]),
    )  # fmt: skip
    assert set(pgm.absent_cells(plain)) == {2}
    assert pgm.absent_cells(with_empty_counts(plain, {"A": 10, "C": 40})) == {}
    assert set(pgm.absent_cells(with_empty_counts(plain, {"A": 10, "C": 14}))) == {2}


def test_releases_without_empty_counts_write_the_whole_category_empty(spark) -> None:  # noqa: ANN001
    """An old-style release (no empty counts) keeps today's decoding (every cell of the empty category is
    null); with empty counts the same release and seed write A never empty and C empty at its measured rate."""
    params = SynthesisParams(target_number_of_records=10_000, partitions=2, seed=7)
    old = measured_release()
    assert pgm.measured_empty_counts(old) is None and pgm.rest_empty_shares(old, pgm.fit_release(old)) == {}
    before = pgm.sample(old, params, spark).toPandas()
    assert before["A"].isna().mean() == pytest.approx(0.10, abs=0.005)  # JOINT_AB's third row
    assert before["C"].isna().mean() == pytest.approx(0.25, abs=0.005)
    messages: list[str] = []
    after = pgm.sample(
        with_empty_counts(old, {"A": 0, "B": 2, "C": 100}), params, spark, progress=messages.append
    ).toPandas()
    assert not after["A"].isna().any() and not after["B"].isna().any()
    assert after["C"].isna().mean() == pytest.approx(0.10, abs=0.005)
    assert any("empty category of 3 columns decoded" in m for m in messages)


def test_codebook_range_finds_where_a_thin_tail_begins() -> None:
    """A codebook of years: 25 years no record holds, a thin tail (1-5 a year), then the bulk, and a code for
    "not applicable" above; 35 records of noise per cell. Over 200 draws the lower end lies past the empty
    years in nearly all, cuts few of the tail's records, and the upper end never cuts the bulk or the code."""
    truth = np.concatenate(
        [
            np.zeros(25),
            [2, 2, 0, 0, 3, 1, 1, 2, 0, 5, 5, 14, 13, 20, 31, 40, 50, 60, 80, 100],
            np.full(30, 300.0),
        ]
    )
    truth = np.append(truth, 30_000.0)
    std = np.full(truth.size, 35.0)
    rng = np.random.default_rng(2026)
    past_empty, cut = 0, []
    for _ in range(200):
        lower, upper = pgm.codebook_range(truth + rng.normal(0.0, 35.0, truth.size), std)
        assert upper == truth.size - 1
        past_empty += lower >= 25
        cut.append(truth[:lower].sum())
    assert past_empty >= 190
    assert np.mean(cut) < 100 and max(cut) < 400  # of the tail's 434 records below the bulk


def test_codebook_range_cuts_nothing_without_a_signal_and_skips_unmeasured_cells() -> None:
    assert pgm.codebook_range(np.zeros(6), np.ones(6)) == (0, 5)
    assert pgm.codebook_range(np.array([0.0, 0.0, 100.0, 0.0]), np.array([1.0, 1.0, 1.0, np.inf])) == (2, 2)


def test_a_public_codebook_of_numbers_loses_its_ends_beyond_the_data() -> None:
    """C's public codebook lists 1..30 (sorted as text: "1", "10", "11", ..); its records hold 11..25. The
    values beyond are absent, whatever their text order; the values inside keep their cells, rare ones too. A
    codebook of words is left alone, and so is a column whose values were discovered."""
    years = [str(v) for v in range(1, 31)]
    aggregates = pd.DataFrame(
        {
            "k": [1] * (len(years) + 2),
            "columns": [["A"], ["B"]] + [["C"]] * len(years),
            "values": [["a"], ["x"]] + [[v] for v in years],
            "count": [1] * (len(years) + 2),
        }
    )
    base = Release.from_pandas(aggregates, measured_release().manifest)
    c_domain = base.domains[2]
    truth = np.array([400.0 if 11 <= int(v) <= 25 else 0.0 for v in c_domain] + [0.0])
    truth[c_domain.index("18")] = 3.0  # a rare value inside: kept
    noise = np.random.default_rng(5).normal(0.0, 2.0, truth.size)
    c_table = measurement_of(columns=(2,), values=truth + noise, std=2.0)

    def release_with(public: list[str]) -> Release:
        manifest = {**dict(base.manifest), "domain_discovery": {"public_domain_columns": public}}
        return Release(base.columns, base.domains, base.marginals, manifest, measurements=(c_table,))

    absent = pgm.absent_cells(release_with(["C"]))
    assert set(absent) == {2}
    judged = {v for v, cut in zip(c_domain, absent[2][:-1], strict=True) if cut}
    assert judged == {str(v) for v in range(1, 31) if not 11 <= v <= 25}
    assert absent[2][-1]  # the empty category: measured about zero
    only_empty = pgm.absent_cells(release_with([]))
    assert not only_empty[2][:-1].any()
    words = Release.from_pandas(
        aggregates.assign(values=[["a"], ["x"]] + [[f"y{v}"] for v in years]), base.manifest
    )
    manifest = {**dict(base.manifest), "domain_discovery": {"public_domain_columns": ["C"]}}
    as_words = Release(words.columns, words.domains, words.marginals, manifest, measurements=(c_table,))
    assert not pgm.absent_cells(as_words)[2][:-1].any()  # no order to read ends from


def test_measured_empty_counts_give_each_settled_column_its_own_noise_std() -> None:
    # the discovery measures the columns the DP profile settled in a group of their own (docs/design.md 4.7):
    # their empty counts carry that group's noise, which the empty-cell tests must read
    disc = {
        "empty_counts": {"a": 40, "b": -3, "c": 12},
        "empty_counts_noise_std": 16.0,
        "settled": {"columns": ["b"], "noise_std": 32.0},
    }
    release = SimpleNamespace(manifest={"domain_discovery": disc}, columns=("a", "b", "c", "d"))
    counts, stds = pgm.measured_empty_counts(release)
    assert counts == {0: 40.0, 1: -3.0, 2: 12.0} and stds == {0: 16.0, 1: 32.0, 2: 16.0}
