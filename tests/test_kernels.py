"""The synthesizers' shared kernels: largest-remainder rounding, IPF, partitioned sampling."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.synthesizers._kernels import ipf, largest_remainder, sample_partitions


def test_largest_remainder_sums_exactly_and_never_goes_below_zero() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        p = rng.dirichlet(np.full(7, 0.3))
        total = int(rng.integers(0, 1000))
        out = largest_remainder(p * total, total)
        assert out.sum() == total and (out >= 0).all()
        assert np.all(np.abs(out - p * total) < 1.0)
    # floors above the total (float rounding): units come back from entries >= 1 only
    np.testing.assert_array_equal(largest_remainder(np.array([0.0, 2.0, 1.0]), 2), [0, 1, 1])
    np.testing.assert_array_equal(largest_remainder(np.array([0.5, 0.5, 1.0]), 2), [1, 0, 1])


def test_ipf_fits_both_margins_of_a_two_way_table() -> None:
    seed = np.full((3, 4), 0.01) + np.arange(12).reshape(3, 4)
    rows, cols = np.array([10.0, 0.0, 30.0]), np.array([5.0, 5.0, 20.0, 10.0])
    (fitted,) = ipf([seed], [[((0,), rows), ((1,), cols)]])
    np.testing.assert_allclose(fitted.sum(axis=1), rows, atol=1e-5)
    np.testing.assert_allclose(fitted.sum(axis=0), cols, atol=1e-5)
    assert (fitted[1] == 0).all()
    assert ipf([], []) == []


def test_ipf_keeps_fixed_cells_and_fits_the_free_ones_to_what_the_margins_leave() -> None:
    # a 3 x 3 table whose last row and column are free (the cells with an empty value)
    seed = np.array([[40.0, 10.0, 1.0], [10.0, 30.0, 1.0], [1.0, 1.0, 1.0]])
    fixed = np.zeros((3, 3), dtype=bool)
    fixed[:2, :2] = True
    rows, cols = np.array([60.0, 45.0, 25.0]), np.array([55.0, 50.0, 25.0])
    plain, kept = ipf([seed, seed], [[((0,), rows), ((1,), cols)]] * 2, fixed=[None, fixed])
    np.testing.assert_allclose(kept[:2, :2], seed[:2, :2])  # the fixed cells are where they were
    np.testing.assert_allclose(kept[:2, 2], rows[:2] - seed[:2, :2].sum(axis=1), atol=1e-4)
    np.testing.assert_allclose(kept[2, :2], cols[:2] - seed[:2, :2].sum(axis=0), atol=1e-4)
    for got in (plain, kept):
        np.testing.assert_allclose(got.sum(axis=1), rows, atol=1e-4)
        np.testing.assert_allclose(got.sum(axis=0), cols, atol=1e-4)
    assert not np.allclose(plain[:2, :2], seed[:2, :2])  # plain IPF moves every cell
    # a margin below its fixed cells' sum scales the whole fiber, as plain IPF does
    (short,) = ipf(
        [seed], [[((0,), np.array([25.0, 45.0, 3.0])), ((1,), np.array([30.0, 40.0, 3.0]))]], fixed=[fixed]
    )
    np.testing.assert_allclose(short.sum(axis=1), [25.0, 45.0, 3.0], atol=1e-4)
    np.testing.assert_allclose(short.sum(axis=0), [30.0, 40.0, 3.0], atol=1e-4)


def test_sample_partitions_takes_codes_or_columns_and_orders_rows_by_seed(spark) -> None:
    def codes(part: int, parts: int) -> np.ndarray:
        return np.array([[part, -1], [0, 1], [1, 0]], dtype=np.int32)

    def columns(part: int, parts: int):  # noqa: ANN202
        values = {"x": [f"p{part}", None, "b"], "y": ["u", "v", None]}
        return [values, pd.DataFrame(values), pa.table(values)][part]

    domains = (("a", "b", "c"), ("u", "v"))
    first = sample_partitions(spark, codes, columns=("x", "y"), seed=5, partitions=3, domains=domains)
    assert first.columns == ["x", "y"] and first.rdd.getNumPartitions() == 3
    rows = first.collect()
    again = sample_partitions(spark, codes, columns=("x", "y"), seed=5, partitions=3, domains=domains)
    assert again.collect() == rows
    assert Counter(tuple(r) for r in rows) == Counter(
        [("a", None), ("a", "v"), ("b", "u")]
        + [("a", "v"), ("b", None), ("b", "u")]
        + [("a", "v"), ("b", "u"), ("c", None)]
    )
    by_column = sample_partitions(spark, columns, columns=("x", "y"), seed=5, partitions=3).collect()
    assert Counter(tuple(r) for r in by_column) == Counter(
        (x, y) for p in range(3) for x, y in zip([f"p{p}", None, "b"], ["u", "v", None], strict=True)
    )
    with pytest.raises(InvalidParameterError, match="distinct"):
        sample_partitions(spark, codes, columns=("x", "x"), seed=1, partitions=1, domains=domains)
    with pytest.raises(InvalidParameterError, match="partitions must be >= 1"):
        sample_partitions(spark, codes, columns=("x", "y"), seed=1, partitions=0, domains=domains)


def test_partition_task_streams_blocks_in_their_order_without_permuting() -> None:
    """``permute=False``: a draw may return blocks of codes, emitted one by one in the draw's order."""
    from spark_dpsynth.synthesizers._kernels import _partition_task

    blocks = [np.array([[0, 1], [1, -1]]), np.array([[1, 0]])]

    def draw(part: int, parts: int):  # noqa: ANN202 - an iterator of code arrays
        yield from blocks if part == 1 else ()

    domains = (("a", "b"), ("x", "y"))
    task = _partition_task(
        draw, columns=("A", "B"), domains=domains, seed=1, parts=2, stream=3, label="t", permute=False
    )
    ids = pa.record_batch([pa.array([0, 1], type=pa.int64())], names=["id"])
    out = pa.Table.from_batches(list(task(iter([ids])))).to_pydict()
    assert out == {"c0": ["a", "b", "b"], "c1": ["y", None, "x"]}
    permuting = _partition_task(
        draw, columns=("A", "B"), domains=domains, seed=1, parts=2, stream=3, label="t", permute=True
    )
    with pytest.raises(ValueError, match="permute=False"):
        list(permuting(iter([ids])))
