"""An outside yardstick for ``quality.py``: pandas, NumPy and SciPy only, independent of the package's evaluation.

It compares the input table (as the CLI reads it: Spark's inferred types) with a synthetic table (the CLI's
output) and never reads a release, its bins or its manifest:

* **Column kinds** (:func:`column_kinds`): a column is ``numeric`` when its input dtype is a number (not bool)
  with more than ``max_categories`` (100) distinct values; ``numeric_text`` when it is text whose non-empty
  values are more than half finite numbers, with more than 100 distinct numbers (an income of numbers and
  ``N``: its numbers on the deciles of the input's numbers, its other values cells of their own); every other
  column (strings, integer codes, numbers with at most 100 values) is ``categorical``.
* **Mean 1-/2-/3-way TVD** (:func:`mean_tvd`): total variation distance ``0.5 * sum |p - q|`` of the joint
  distributions of each column subset, averaged over all subsets of that length, or over ``max_subsets``
  subsets drawn with a fixed seed when there are more. Categorical columns are compared on the input's own
  values (a synthetic value the input never holds is a cell of its own, so its mass counts in full); numeric
  columns on the input's deciles (the same edges for both tables; values below the first edge in bin 0, above
  the last in bin 9). An empty cell (null) is a value of its own in both.
* **Values outside the input** (:func:`outside_shares`): per column, the share of synthetic cells whose value
  never occurs in the input column (categorical) or lies outside the input's observed ``[min, max]``
  (numeric); an empty cell counts as outside when the input column has none, and so does a synthetic value
  that is not a number in a numeric column. The table's share is over all its cells.
* **Type differences** (:func:`type_differences`): the columns whose output type differs from the input's.
* **Wasserstein / std** (:func:`wasserstein_over_std`): for every column whose input dtype is a number (any
  number of values), ``scipy.stats.wasserstein_distance`` of the non-empty values divided by the input's
  standard deviation.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

MAX_CATEGORIES = 100
"""A number column with at most this many distinct input values is compared on its values, not deciles."""
DECILES = np.linspace(0.1, 0.9, 9)


def _is_number(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype)


def _text_numbers(series: pd.Series) -> pd.Series:
    """A text column's finite numbers (NaN for its other values and empty cells)."""
    numbers = pd.to_numeric(series.astype(object).where(series.notna(), None), errors="coerce")
    return numbers.where(np.isfinite(numbers.astype("float64")))


def column_kinds(table: pd.DataFrame, max_categories: int = MAX_CATEGORIES) -> dict[str, str]:
    """Each column's kind from the input table: ``numeric`` (a number dtype with more than ``max_categories``
    distinct values), ``numeric_text`` (a text column whose non-empty values are more than half finite numbers,
    with more than ``max_categories`` distinct numbers: an income of numbers and ``N``) or ``categorical``."""
    kinds = {}
    for c in table.columns:
        source = table[c]
        if _is_number(source):
            numeric = source.nunique(dropna=True) > max_categories
            kinds[c] = "numeric" if numeric else "categorical"
            continue
        kinds[c] = "categorical"
        if pd.api.types.is_bool_dtype(source.dtype):
            continue
        numbers = _text_numbers(source)
        if numbers.notna().sum() > 0.5 * source.notna().sum() and numbers.nunique() > max_categories:
            kinds[c] = "numeric_text"
    return kinds


def _as_input_type(synthetic: pd.Series, source: pd.Series) -> pd.Series:
    """The synthetic column in the input column's terms: numbers (anything else empty) for a number column,
    strings for any other (empty stays empty)."""
    if _is_number(source):
        return pd.to_numeric(synthetic, errors="coerce").astype("float64")
    return synthetic.astype(object).where(synthetic.notna(), None).map(lambda v: v if v is None else str(v))


def _categorical_keys(series: pd.Series, number: bool) -> pd.Series:
    if number:
        return series.astype("float64").astype(object).where(series.notna(), None)
    return series.astype(object).where(series.notna(), None).map(lambda v: v if v is None else str(v))


def decile_edges(values: pd.Series) -> np.ndarray:
    """The input's distinct decile edges (empty cells left out)."""
    finite = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype="float64")
    if finite.size == 0:
        return np.array([], dtype="float64")
    return np.unique(np.quantile(finite, DECILES))


def _bin(values: pd.Series, edges: np.ndarray) -> np.ndarray:
    """Decile bin of each value (``searchsorted`` on the edges, right side), -1 for an empty cell."""
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64")
    out = np.searchsorted(edges, numbers, side="right").astype("int64")
    out[np.isnan(numbers)] = -1
    return out


def encode(
    table: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]]:
    """Integer codes of every column in a code space shared by both tables: (input codes, synthetic codes,
    number of codes per column)."""
    codes_in: dict[str, np.ndarray] = {}
    codes_syn: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    for c, kind in kinds.items():
        source = table[c]
        other = _as_input_type(synthetic[c], source)
        if kind == "numeric":
            edges = decile_edges(source)
            left, right = _bin(source, edges), _bin(other, edges)
        elif kind == "numeric_text":
            # numbers on the deciles of the input's numbers, every other value a cell of its own
            edges = decile_edges(_text_numbers(source))
            left, right = _text_bins(source, edges), _text_bins(other, edges)
        else:
            number = _is_number(source)
            left = _categorical_keys(source, number).to_numpy()
            right = _categorical_keys(other, number).to_numpy()
        both = np.concatenate([np.asarray(left, dtype=object), np.asarray(right, dtype=object)])
        codes, uniques = pd.factorize(pd.Series(both, dtype=object), use_na_sentinel=False)
        codes_in[c] = codes[: len(left)].astype("int64")
        codes_syn[c] = codes[len(left) :].astype("int64")
        sizes[c] = max(len(uniques), 1)
    return codes_in, codes_syn, sizes


def _text_bins(values: pd.Series, edges: np.ndarray) -> np.ndarray:
    """Keys of a numbers-written-as-text column: ``"bin i"`` for a finite number (its decile bin), the text
    itself for any other value, None for an empty cell."""
    numbers = _text_numbers(values)
    bins = _bin(numbers, edges)
    text = values.astype(object).where(values.notna(), None).map(lambda v: v if v is None else str(v))
    return np.where(numbers.notna().to_numpy(), np.char.add("bin ", bins.astype(str)), text.to_numpy())


def _joint(codes: dict[str, np.ndarray], sizes: dict[str, int], subset: tuple[str, ...]) -> np.ndarray:
    key = np.zeros(len(codes[subset[0]]), dtype="int64")
    for c in subset:
        key = key * sizes[c] + codes[c]
    return key


def subset_tvd(
    codes_in: dict[str, np.ndarray],
    codes_syn: dict[str, np.ndarray],
    sizes: dict[str, int],
    subset: tuple[str, ...],
) -> float:
    """TVD of the joint distribution of one column subset (codes from :func:`encode`)."""
    left = _joint(codes_in, sizes, subset)
    right = _joint(codes_syn, sizes, subset)
    if len(left) == 0 or len(right) == 0:
        return 1.0 if len(left) != len(right) else 0.0
    keys, inverse = np.unique(np.concatenate([left, right]), return_inverse=True)
    p = np.bincount(inverse[: len(left)], minlength=len(keys)) / len(left)
    q = np.bincount(inverse[len(left) :], minlength=len(keys)) / len(right)
    return float(0.5 * np.abs(p - q).sum())


def choose_subsets(columns: list[str], k: int, max_subsets: int, seed: int) -> tuple[list[tuple], int]:
    """The column subsets of length ``k`` to compare (all, or ``max_subsets`` distinct ones drawn with ``seed``)
    and how many there are."""
    total = math.comb(len(columns), k)
    if max_subsets <= 0 or total <= max_subsets:
        return list(itertools.combinations(columns, k)), total
    rng = np.random.default_rng(seed + k)
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < max_subsets:
        chosen.add(tuple(sorted(rng.choice(len(columns), size=k, replace=False).tolist())))
    return [tuple(columns[i] for i in idx) for idx in sorted(chosen)], total


def mean_tvd(
    table: pd.DataFrame,
    synthetic: pd.DataFrame,
    kinds: dict[str, str] | None = None,
    lengths: tuple[int, ...] = (1, 2, 3),
    max_subsets: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Mean TVD per subset length: ``{"1": {"mean", "max", "compared", "total"}, ...}``."""
    kinds = kinds or column_kinds(table)
    codes_in, codes_syn, sizes = encode(table, synthetic, kinds)
    columns = list(kinds)
    out: dict[str, dict[str, Any]] = {}
    for k in lengths:
        if k > len(columns):
            continue
        subsets, total = choose_subsets(columns, k, max_subsets, seed)
        values = [subset_tvd(codes_in, codes_syn, sizes, s) for s in subsets]
        out[str(k)] = {
            "mean": float(np.mean(values)),
            "max": float(np.max(values)),
            "compared": len(values),
            "total": total,
        }
        if k == 1:
            out["1"]["by_column"] = {s[0]: v for s, v in zip(subsets, values, strict=True)}
    return out


def outside_shares(
    table: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str] | None = None
) -> dict[str, Any]:
    """Share of synthetic cells outside the input column: ``{"table": share of all cells, "by_column": {...}}``."""
    kinds = kinds or column_kinds(table)
    by_column: dict[str, float] = {}
    outside_cells = 0
    for c, kind in kinds.items():
        source = table[c]
        other = _as_input_type(synthetic[c], source)
        empty_seen = bool(source.isna().any())
        missing = other.isna().to_numpy()
        if kind == "numeric":
            numbers = pd.to_numeric(source, errors="coerce")
            low, high = numbers.min(), numbers.max()
            values = other.to_numpy(dtype="float64")
            with np.errstate(invalid="ignore"):
                out = ~missing & ((values < low) | (values > high))
        elif kind == "numeric_text":
            # a number outside the input's numbers' range, or a text the input never holds
            numbers, drawn = _text_numbers(source), _text_numbers(other)
            values = drawn.to_numpy(dtype="float64")
            with np.errstate(invalid="ignore"):
                beyond = (values < numbers.min()) | (values > numbers.max())
            texts = set(source[numbers.isna() & source.notna()].astype(str))
            unseen = drawn.isna().to_numpy() & ~other.astype(str).isin(texts).to_numpy()
            out = ~missing & (beyond | unseen)
        else:
            number = _is_number(source)
            seen = set(_categorical_keys(source, number).dropna().tolist())
            keys = _categorical_keys(other, number)
            out = ~missing & ~keys.isin(seen).to_numpy()
        if not empty_seen:
            out = out | missing
        count = int(out.sum())
        outside_cells += count
        by_column[c] = count / len(other) if len(other) else 0.0
    cells = len(synthetic) * len(kinds)
    return {"table": outside_cells / cells if cells else 0.0, "by_column": by_column}


def type_differences(input_types: dict[str, str], output_types: dict[str, str]) -> dict[str, list[str]]:
    """The columns whose output type differs from the input's: ``{column: [input type, output type]}`` (a column
    absent from the output has type ``None``)."""
    return {c: [t, output_types.get(c)] for c, t in input_types.items() if output_types.get(c) != t}


def wasserstein_over_std(table: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, float | None]:
    """Wasserstein distance / the input's std of every column whose input dtype is a number (empty cells left
    out; ``None`` where either side has no number or the input's std is 0)."""
    from scipy.stats import wasserstein_distance

    out: dict[str, float | None] = {}
    for c in table.columns:
        source = table[c]
        if not _is_number(source):
            continue
        left = pd.to_numeric(source, errors="coerce").dropna().to_numpy(dtype="float64")
        right = _as_input_type(synthetic[c], source).dropna().to_numpy(dtype="float64")
        std = float(np.std(left)) if left.size else 0.0
        if left.size == 0 or right.size == 0 or std == 0.0:
            out[c] = None
            continue
        out[c] = float(wasserstein_distance(left, right) / std)
    return out


def yardstick(
    table: pd.DataFrame,
    synthetic: pd.DataFrame,
    input_types: dict[str, str] | None = None,
    output_types: dict[str, str] | None = None,
    max_subsets: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every figure of the module for one synthetic table (the keys ``ys_*`` of a benchmark row)."""
    kinds = column_kinds(table)
    tvd = mean_tvd(table, synthetic, kinds, max_subsets=max_subsets, seed=seed)
    outside = outside_shares(table, synthetic, kinds)
    ws = wasserstein_over_std(table, synthetic)
    finite = {c: v for c, v in ws.items() if v is not None}
    worst = max(finite, key=finite.get) if finite else None
    out: dict[str, Any] = {
        "ys_tvd_1": tvd.get("1", {}).get("mean"),
        "ys_tvd_2": tvd.get("2", {}).get("mean"),
        "ys_tvd_3": tvd.get("3", {}).get("mean"),
        "ys_tvd": tvd,
        "ys_kinds": kinds,
        "ys_outside_share": outside["table"],
        "ys_outside_by_column": outside["by_column"],
        "ys_columns_outside_over_1pct": sum(v > 0.01 for v in outside["by_column"].values()),
        "ys_wasserstein_over_std": ws,
        "ys_wasserstein_over_std_max": finite[worst] if worst else None,
        "ys_wasserstein_over_std_max_column": worst,
    }
    if input_types is not None and output_types is not None:
        diffs = type_differences(input_types, output_types)
        out["ys_type_differences"] = diffs
        out["ys_type_differences_count"] = len(diffs)
    return out


def recode_to_integers(table: pd.DataFrame, bins: dict[str, tuple[float, ...]] | None = None) -> pd.DataFrame:
    """Each column's distinct values mapped to ``0..k-1`` in sorted order (numbers by value, anything else as
    strings); a column in ``bins`` is first replaced by its bin index on those edges (``< e0`` is 0,
    ``[e_i, e_i+1)`` is ``i + 1``). Empty cells stay empty. A deterministic transform of the table."""
    out = {}
    for c in table.columns:
        column = table[c]
        if bins and c in bins:
            numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype="float64")
            index = np.searchsorted(np.asarray(bins[c], dtype="float64"), numbers, side="right").astype(float)
            index[np.isnan(numbers)] = np.nan
            column = pd.Series(index, index=table.index)
        values = column.dropna().unique()
        numeric = pd.to_numeric(pd.Series(values), errors="coerce")
        if len(values) and numeric.notna().all():
            order = [v for _, v in sorted(zip(numeric.tolist(), values.tolist(), strict=True))]
        else:
            order = sorted(values.tolist(), key=str)
        mapping = {v: i for i, v in enumerate(order)}
        out[c] = column.map(mapping).astype("Int64")
    return pd.DataFrame(out, index=table.index)
