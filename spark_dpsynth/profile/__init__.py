"""Column types and the post-processing of the DP column profile (docs/design.md section 2.8).

The public side of a column's type and of its DP profile: the schema's scales, the public grids, and what the
noisy profile decides. The noisy counts themselves are drawn by the mechanisms
(:mod:`spark_dpsynth.mechanisms._profile`); everything here reads the schema, the configuration, public grids or
already noisy counts. The modules, in the order a column goes through them:

* :mod:`.columns`: each attribute column's scale from the schema and the configuration (:func:`column_types`,
  :func:`numeric_view`), its type after the profile (:func:`apply_profiles`) and the manifest's
  ``column_types``, ``identifier_columns`` and ``column_meanings`` blocks.
* :mod:`.text`: numbers written as text, the public side of their DP test (candidates, text kinds, new scales).
* :mod:`.grid`: the public grids of the profile and the cell of a value (on Spark and on the driver).
* :mod:`.levels`: when a noisy count, or a sum of them, stands out of its noise.
* :mod:`.blocks`: the hierarchical blocks the profile measures, and the reading of a run of cells from them.
* :mod:`.spread`: where the profile places a column's records (cells that stand out, blocks spread evenly over
  their values or their lattice).
* :mod:`.span`: where a measurement's records begin and end (its DP range, top codes).
* :mod:`.shape`: a measurement's within-bin shape, from which type restoration draws.
* :mod:`.codes`: sparse code sets, whole-number columns whose records lie on few values far apart.
* :mod:`.decide`: code or measurement (:func:`profile_from_noisy`, :class:`ColumnProfile`).
* :mod:`.exact`: the post-processing of the DP exact-value step (exact values off the grid, heavy edge cells).

Privacy: nothing here draws noise; :func:`text_kind_counts` returns true counts to a caller that noises them
(docs/design.md sections 1.8 and 2.8).
"""

from spark_dpsynth.profile.blocks import (
    BLOCK_LEVELS,
    BLOCK_NOISE,
    FINE_BLOCK_NOISE,
    block_noise,
    block_tree,
    block_units,
)
from spark_dpsynth.profile.columns import (
    IDENTIFIER_TYPES,
    SCALES,
    ColumnType,
    apply_profiles,
    column_types,
    identifiers_manifest,
    meanings_manifest,
    numeric_view,
    profile_targets,
    scale_of,
    types_manifest,
)
from spark_dpsynth.profile.decide import MAX_CODE_RANGE, MEANINGS, ColumnProfile, profile_from_noisy
from spark_dpsynth.profile.exact import (
    EDGE_MIN_SHARE,
    EDGE_PIECES,
    edge_key,
    edge_pieces,
    exact_value_targets,
    profile_with_edges,
    profile_with_exact_values,
)
from spark_dpsynth.profile.grid import (
    DATE_BLOCK_DAYS,
    ProfileGrid,
    candidate_grid,
    cell_key,
    cells_of,
    profile_grid,
    profile_points,
)
from spark_dpsynth.profile.text import (
    TEXT_KINDS,
    text_as_number,
    text_kind_counts,
    text_number_candidates,
    with_text_numbers,
)

__all__ = [
    # columns
    "IDENTIFIER_TYPES",
    "SCALES",
    "ColumnType",
    "apply_profiles",
    "column_types",
    "identifiers_manifest",
    "meanings_manifest",
    "numeric_view",
    "profile_targets",
    "scale_of",
    "types_manifest",
    # text
    "TEXT_KINDS",
    "text_as_number",
    "text_kind_counts",
    "text_number_candidates",
    "with_text_numbers",
    # grid
    "DATE_BLOCK_DAYS",
    "ProfileGrid",
    "candidate_grid",
    "cell_key",
    "cells_of",
    "profile_grid",
    "profile_points",
    # blocks
    "BLOCK_LEVELS",
    "BLOCK_NOISE",
    "FINE_BLOCK_NOISE",
    "block_noise",
    "block_tree",
    "block_units",
    # decide
    "MAX_CODE_RANGE",
    "MEANINGS",
    "ColumnProfile",
    "profile_from_noisy",
    # exact
    "EDGE_MIN_SHARE",
    "EDGE_PIECES",
    "edge_key",
    "edge_pieces",
    "exact_value_targets",
    "profile_with_edges",
    "profile_with_exact_values",
]
