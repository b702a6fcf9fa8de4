"""The score of the DP percentile, shared by the production and the test-mode noise sources.

The DP percentile (SDS, "Differentially private aggregation and synthesis", section 3.2.1; Gopi, Mahabadi,
Yekhanin, "Differentially Private Marginals", Algorithm 1; docs/design.md section 2.2) is the exponential mechanism
(McSherry, Talwar 2007) over public candidates 0..C with the score of OpenDP's
``make_quantile_score_candidates`` (Smith 2011, "Privacy-preserving statistical estimation with optimal
convergence rates").
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["quantile_scores"]


def _alpha_fraction(alpha: float) -> Fraction:
    return Fraction(alpha).limit_denominator(10_000)


def quantile_scores(histogram: np.ndarray, alpha: float) -> tuple[np.ndarray, int]:
    """Scores of the candidates 0..len(histogram)-1 (lower is better) and their sensitivity.

    score(c) = |(den - num) #{x < c} - num #{x > c}| with alpha = num/den (OpenDP's quantile score, Smith 2011).
    Adding or removing one record changes every score by at most max(num, den - num).
    """
    h = np.asarray(histogram, dtype=np.int64)
    frac = _alpha_fraction(alpha)
    num, den = frac.numerator, frac.denominator
    below = np.concatenate(([0], np.cumsum(h)[:-1]))
    above = h.sum() - below - h
    scores = np.abs((den - num) * below - num * above).astype(np.int64)
    return scores, max(num, den - num)
