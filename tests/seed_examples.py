"""Seed 001's worked example (section 2.1; also used in sections 3.1 and 4), shared by the tests."""

# Five records over columns A, B, C (None = empty).
SEED_001_ROWS = [
    ("a1", "b1", "c1"),
    ("a1", "b2", "c1"),
    ("a2", None, "c2"),
    ("a2", "b2", "c1"),
    ("a1", "b2", None),
]

# The aggregate counts A_{R=3} the seed lists for them: ((column, value), ...) -> count.
SEED_001_COUNTS = {
    (("A", "a1"),): 3, (("A", "a2"),): 2, (("B", "b1"),): 1, (("B", "b2"),): 3, (("C", "c1"),): 3, (("C", "c2"),): 1,
    (("A", "a1"), ("B", "b1")): 1, (("A", "a1"), ("B", "b2")): 2, (("A", "a1"), ("C", "c1")): 2,
    (("A", "a2"), ("B", "b2")): 1, (("A", "a2"), ("C", "c1")): 1, (("A", "a2"), ("C", "c2")): 1,
    (("B", "b1"), ("C", "c1")): 1, (("B", "b2"), ("C", "c1")): 2,
    (("A", "a1"), ("B", "b1"), ("C", "c1")): 1, (("A", "a1"), ("B", "b2"), ("C", "c1")): 1,
    (("A", "a2"), ("B", "b2"), ("C", "c1")): 1,
}  # fmt: skip

# The same counts as release/aggregates rows: (k, columns, values, count).
SEED_001_AGGREGATES = [(len(t), [c for c, _ in t], [v for _, v in t], n) for t, n in SEED_001_COUNTS.items()]
