"""The consistency of a release's privacy figures, checked whenever a release is read (docs/design.md section 1.3).

A manifest is a JSON file anyone can edit. :func:`check_release` recomputes the relations the accountant
(:mod:`spark_dpsynth.privacy.accounting`) and the mechanisms write into it and refuses a release whose figures
disagree, so that a hand-edited epsilon, rho, share, protected number of records or measurement is not reported
as the privacy spent nor synthesized from:

* the budget: epsilon > 0, delta in (0, 1), rho > 0; the flat keys (``epsilon``, ``delta``, ``rho``,
  ``accounting``) equal the ``budget`` block's; every share is finite and >= 0; the pure-DP shares add up to at
  most epsilon (to epsilon exactly when nothing is accounted in zCDP), the zCDP shares to at most rho, the delta
  shares to delta; rho is the conversion of the zCDP part of epsilon at the delta of the
  ``zcdp_conversion`` share, under the manifest's accounting (classic: Bun & Steinke 2016, Prop. 1.3;
  ``tight_zcdp``: Canonne, Kamath, Steinke 2020, Prop. 12);
* the marginals mechanism (docs/design.md section 2.3): epsilon_N + epsilon_M (+ the share ``text_numbers``)
  = epsilon, sigma_k and the shares
  ``marginals_k`` (1 / (2 sigma_k^2)), R epsilon_Q^2 / 2 + bins rho + sum_k 1 / (2 sigma_k^2) = rho, the noise
  std sigma_k sqrt(Delta_k), Delta_k >= 1, and the released k-tuples per length equal the aggregates';
* the class-conditional mechanism: epsilon_N + epsilon_M + the domains', the profile's, the exact values' and
  the share ``text_numbers``'s epsilon = epsilon, the Laplace scale
  1 / epsilon per histogram; the archetype mechanism: the two histograms' rho add up to rho and each sigma is
  1 / sqrt(2 rho_h); the measured marginals' rho is 1 / (2 std^2) (or 0 for post-processed counts) and adds up to
  at most rho;
* person-level DP over event rows (docs/design.md section 2.10): the ``persons`` block's pure-DP shares add up
  to its epsilon and its delta share to its delta, the event share epsilon_e is L x the event mechanism's
  epsilon, and the event mechanism's delta is delta / (L e^((L - 1) epsilon_e / L)) (group privacy);
* counts: the protected number of records is an integer >= 1 (every mechanism clamps its noisy count at 1; a
  release read from SDS's files may say 0, an empty table), released counts and noisy person counts are >= 0.

A release read from SDS's own files (``"source": "sds"``) has no privacy parameters: only its counts are checked.
Relations whose keys a manifest lacks (releases written before they existed, manifests built by hand in tests)
are not checked. Messages name the figures that disagree and the privacy parameters, never a count or a value.

What this cannot do: the manifest is not signed, so a forgery that keeps every relation (epsilon, rho, the shares
and the sigmas all edited together) passes; the check makes an edit evident, it does not prove where the release
came from (docs/design.md section 1.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from spark_dpsynth.errors import ReleaseError

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release
    from spark_dpsynth.release.manifest import Manifest

__all__ = [
    "DIGEST_FILE",
    "RELATIVE_TOLERANCE",
    "check_file_digests",
    "check_manifest",
    "check_release",
    "write_file_digests",
]

RELATIVE_TOLERANCE = 1e-6
"""Figures that should be equal may differ by this much, relative (JSON round trips and root finding)."""


def check_release(release: Release) -> None:
    """Refuse a release whose manifest's privacy figures or counts disagree (module docstring).

    Raises:
        ReleaseError: one line naming the first figure that disagrees.
    """
    m = release.manifest
    _refuse(_first_problem([lambda: _records(m), lambda: _counts(release), *_manifest_checks(m, release)]))


def check_manifest(manifest: Manifest) -> None:
    """The checks of :func:`check_release` that read the manifest alone: a command that reads a release runs
    them before Spark starts (the others read its aggregates).

    Raises:
        ReleaseError: as :func:`check_release`.
    """
    _refuse(_first_problem([lambda: _records(manifest), *_manifest_checks(manifest, None)]))


def _refuse(problem: str | None) -> None:
    if problem is not None:
        raise ReleaseError(
            f"the release's manifest is inconsistent: {problem}; it was edited or damaged, and is refused "
            "(aggregate again to make a new release)"
        )


def _manifest_checks(m: Manifest, release: Release | None) -> list[Callable[[], str | None]]:
    """The privacy figures' checks (none for a release read from SDS's files); the marginals' only with the
    release (they compare its aggregates)."""
    if m.source == "sds":
        return []
    marginals = [] if release is None else [lambda: _marginals(release)]
    return [
        lambda: _budget(m),
        *marginals,
        lambda: _class_conditional(m),
        lambda: _archetype(m),
        lambda: _measurements(m),
        lambda: _persons(m),
    ]


def _first_problem(checks: list[Callable[[], str | None]]) -> str | None:
    for check in checks:
        problem = check()
        if problem is not None:
            return problem
    return None


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)


def _at_most(a: float, b: float) -> bool:
    return a <= b * (1 + RELATIVE_TOLERANCE) + 1e-12


def _number(value: Any) -> float | None:
    """``value`` as a finite float, None when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _integer(value: Any) -> int | None:
    """``value`` as an int when it is an integral number, else None."""
    number = _number(value)
    if number is None or number != int(number):
        return None
    return int(number)


# --------------------------------------------------------------------------------------------- counts


def _records(m: Manifest) -> str | None:
    low = 0 if m.source == "sds" else 1
    for key in ("protected_number_of_records", "protected_number_of_persons"):
        if m.get(key) is None:
            continue
        n = _integer(m[key])
        if n is None or n < low:
            return f"{key} must be an integer >= {low} (the noisy count is clamped at {low})"
    return None


def _counts(release: Release) -> str | None:
    for k, marginal in sorted(release.marginals.items()):
        if len(marginal.counts) and int(marginal.counts.min()) < 0:
            return f"released counts of length {k} are negative"
    noisy = release.manifest.get("noisy_persons_per_archetype")
    by_category = release.manifest.get("noisy_persons_per_category")
    values = list(noisy or ()) + list((by_category or {}).values())
    if any(_number(x) is None or float(x) < 0 for x in values):
        return "the noisy person counts must be numbers >= 0"
    return None


# --------------------------------------------------------------------------------------------- budget


def _budget(m: Manifest) -> str | None:
    budget = m.budget
    if budget is None:
        return None
    eps, delta, rho = budget.epsilon, budget.delta, budget.rho
    if _number(eps) is None or eps <= 0:
        return "epsilon must be a finite number > 0"
    if delta is not None and not (_number(delta) is not None and 0 < delta < 1):
        return "delta must be in (0, 1)"
    if rho is not None and (_number(rho) is None or rho <= 0):
        return "rho must be a finite number > 0"
    block = m.get("budget")
    if isinstance(block, Mapping):
        for key in ("epsilon", "delta", "rho"):
            flat, inner = m.get(key), block.get(key)
            if flat is None or inner is None:
                continue
            if _number(flat) is None or _number(inner) is None or not _close(float(flat), float(inner)):
                return f"{key} {flat!r} differs from the budget's {key} {inner!r}"
        if m.get("accounting") is not None and block.get("accounting") is not None:
            if str(m["accounting"]) != str(block["accounting"]):
                return f"accounting {m['accounting']!r} differs from the budget's {block['accounting']!r}"
    shares = budget.shares
    for s in shares:
        for key in ("epsilon", "delta", "rho"):
            value = getattr(s, key)
            if value is not None and (_number(value) is None or value < 0):
                return f"the share {s.name!r}: its {key} is not a finite number >= 0"
    if not shares:
        return None
    pure = sum(s.epsilon or 0.0 for s in shares if s.rho is None)
    if not _at_most(pure, eps):
        return f"the pure-DP shares add up to epsilon {pure:.6g}, more than epsilon {eps:g}"
    if rho is None and not _close(pure, eps):
        return f"the shares add up to epsilon {pure:.6g}, not epsilon {eps:g}"
    spent_delta = sum(s.delta or 0.0 for s in shares)
    if spent_delta > 0 and (delta is None or not _close(spent_delta, delta)):
        return f"the delta shares add up to {spent_delta:.3g}, not delta {delta!r}"
    if rho is not None:
        spent_rho = sum(s.rho or 0.0 for s in shares)
        if not _at_most(spent_rho, rho):
            return f"the zCDP shares add up to rho {spent_rho:.6g}, more than rho {rho:.6g}"
        conversion = next((s for s in shares if s.name == "zcdp_conversion"), None)
        if conversion is not None and conversion.delta:
            # The epsilon converted to rho: what the pure-DP steps left (a "zcdp" share holds it explicitly).
            zcdp = eps - sum(s.epsilon or 0.0 for s in shares if s.rho is None and s.name != "zcdp")
            return _conversion(zcdp, conversion.delta, rho, budget.accounting or "classic", eps)
    return None


def _conversion(
    zcdp_epsilon: float, conversion_delta: float, rho: float, accounting: str, eps: float
) -> str | None:
    """rho against the epsilon it was converted from at ``conversion_delta`` (the delta the conversion spends)."""
    from spark_dpsynth.privacy.accounting import epsilon_from_rho_delta, opendp_epsilon_of_rho

    if zcdp_epsilon <= 0:
        return f"epsilon {eps:g} leaves nothing for rho {rho:.6g} after the pure-DP shares"
    if accounting == "tight_zcdp":
        implied = opendp_epsilon_of_rho(rho, conversion_delta)
        # The conversion caps rho at epsilon (then the exact epsilon of rho is below epsilon).
        ok = _close(implied, zcdp_epsilon) or (_close(rho, zcdp_epsilon) and _at_most(implied, zcdp_epsilon))
    elif accounting == "classic":
        implied = epsilon_from_rho_delta(rho, conversion_delta)
        ok = _close(implied, zcdp_epsilon)
    else:
        return f"accounting {accounting!r} is unknown"
    if not ok:
        return (
            f"rho {rho:.6g} is (epsilon {implied:.6g}, delta {conversion_delta:.3g})-DP under {accounting} "
            f"accounting, but the manifest gives epsilon {eps:g} ({zcdp_epsilon:.6g} for the zCDP steps)"
        )
    return None


# --------------------------------------------------------------------------------------------- mechanisms


def _marginals(release: Release) -> str | None:
    m = release.manifest
    block = m.marginals
    if m.mechanism != "marginals" or block is None or m.budget is None:
        return None
    eps, delta, rho = m.budget.epsilon, m.budget.delta, m.budget.rho
    if block.epsilon_n is not None and block.epsilon_m is not None:
        eps_t = _share_epsilon(m, "text_numbers")
        if not _close(block.epsilon_n + block.epsilon_m + eps_t, eps):
            text = f" + the test of numbers written as text {eps_t:.6g}" if eps_t else ""
            return (
                f"epsilon_N {block.epsilon_n:.6g} + epsilon_M {block.epsilon_m:.6g}{text} differs from epsilon "
                f"{eps:g}"
            )
        share = _share(m, "number_of_records")
        if share is not None and share.epsilon is not None and not _close(share.epsilon, block.epsilon_n):
            return f"epsilon_N {block.epsilon_n:.6g} differs from its share {share.epsilon:.6g}"
        if rho is not None and delta is not None and not m.budget.shares:
            # A manifest without shares (written before them): the conversion at delta / 2 of section 2.3.
            problem = _conversion(block.epsilon_m, delta / 2.0, rho, m.budget.accounting or "classic", eps)
            if problem is not None:
                return problem
    spent = 0.0
    for k, length in sorted(block.lengths.items()):
        sigma = length.sigma
        if sigma is None:
            continue
        if _number(sigma) is None or sigma <= 0:
            return f"sigma_{k} must be a finite number > 0"
        spent += 1.0 / (2.0 * sigma * sigma)
        share = _share(m, f"marginals_k{k}")
        if share is not None and share.rho is not None and not _close(share.rho, 1.0 / (2.0 * sigma * sigma)):
            return f"sigma_{k} {sigma:.6g} does not spend its share rho {share.rho:.6g} (1 / (2 sigma_{k}^2))"
        if length.sensitivity is not None:
            if length.sensitivity < 1:
                return f"the sensitivity Delta_{k} must be >= 1"
            if length.noise_std is not None and not _close(
                length.noise_std, sigma * math.sqrt(length.sensitivity)
            ):
                return f"the noise std of length {k} differs from sigma_{k} sqrt(Delta_{k})"
        if length.released_tuples is not None:
            marginal = release.marginals.get(k)
            held = 0 if marginal is None else len(marginal)
            if held != length.released_tuples:
                return f"released_tuples for length {k} differs from the k-tuples in the aggregates"
    eps_q = _number(m.get("epsilon_q"))
    if rho is not None and eps_q is not None and spent > 0:
        r = len(block.lengths)
        total = r * eps_q * eps_q / 2.0 + float(m.get("bins_rho") or 0.0) + spent
        total += float(m.get("exact_values_rho") or 0.0)
        if not _close(total, rho):
            return (
                "R epsilon_Q^2 / 2 + bins rho + exact values rho + sum_k 1 / (2 sigma_k^2) = "
                f"{total:.6g} differs from rho {rho:.6g}"
            )
    return None


def _class_conditional(m: Manifest) -> str | None:
    if m.mechanism != "class_conditional" or m.budget is None:
        return None
    parts = [_number(m.get(k)) for k in ("epsilon_n", "epsilon_m")]
    if None in parts:
        return None
    total = sum(parts) + float(_number(m.get("epsilon_domain")) or 0.0)  # type: ignore[arg-type]
    total += float(_number(m.get("epsilon_profile")) or 0.0)
    total += float(_number(m.get("epsilon_exact_values")) or 0.0)
    total += _share_epsilon(m, "text_numbers")
    if not _close(total, m.budget.epsilon):
        return (
            "epsilon_N + epsilon_M + the domains', the profile's, the exact values' and the test of numbers "
            "written as text's epsilon = "
            f"{total:.6g} differs from epsilon {m.budget.epsilon:g}"
        )
    scale, per = _number(m.get("laplace_scale")), _number(m.get("epsilon_per_histogram"))
    if scale is not None and per is not None and (per <= 0 or not _close(scale, 1.0 / per)):
        return f"the Laplace scale {scale:.6g} differs from 1 / epsilon per histogram"
    return None


def _persons(m: Manifest) -> str | None:
    block = m.get("persons")
    if not isinstance(block, Mapping):
        return None
    eps, delta, cap = (
        _number(block.get("epsilon")),
        _number(block.get("delta")),
        _integer(block.get("max_rows_per_person")),
    )
    if eps is None or eps <= 0 or delta is None or not 0 < delta < 1 or cap is None or cap < 1:
        return "the persons block needs epsilon > 0, delta in (0, 1) and max_rows_per_person >= 1"
    shares = (block.get("budget") or {}).get("shares") or ()
    pure = sum(float(s.get("epsilon") or 0.0) for s in shares)
    if not _close(pure, eps):
        return f"the persons block's shares add up to epsilon {pure:.6g}, not epsilon {eps:g}"
    spent_delta = sum(float(s.get("delta") or 0.0) for s in shares)
    if not _close(spent_delta, delta):
        return f"the persons block's delta shares add up to {spent_delta:.3g}, not delta {delta:.3g}"
    event = next((s for s in shares if s.get("name") == "event_rows"), None)
    row_eps, row_delta = m.budget.epsilon if m.budget else None, m.budget.delta if m.budget else None
    if event is None or row_eps is None:
        return "the persons block lacks the event share or the event mechanism its budget"
    if not _close(float(event["epsilon"]), cap * row_eps):
        return (
            f"the event share epsilon {event['epsilon']:.6g} is not L x the row-level epsilon {row_eps:.6g}"
        )
    # in logs: e^((L - 1) epsilon_r) overflows a float for the largest L and epsilon
    implied = math.log(delta) - math.log(cap) - (cap - 1) * row_eps
    if row_delta is not None and (row_delta <= 0 or not _close(math.log(row_delta), implied)):
        return (
            f"the row-level delta {row_delta:.3g} is not the group-privacy delta of {delta:.3g} over L rows"
        )
    return None


def _archetype(m: Manifest) -> str | None:
    if m.mechanism != "archetype" or m.budget is None or m.budget.rho is None:
        return None
    rho = m.budget.rho
    rho_a, rho_c = _number(m.get("rho_archetypes")), _number(m.get("rho_count_column"))
    if rho_a is not None and rho_c is not None and not _close(rho_a + rho_c, rho):
        return f"the histograms' rho {rho_a:.6g} + {rho_c:.6g} differs from rho {rho:.6g}"
    for name, hist in (m.get("histograms") or {}).items():
        if not isinstance(hist, Mapping):
            continue
        h_rho, sigma = _number(hist.get("rho")), _number(hist.get("sigma"))
        if h_rho is None or sigma is None:
            continue
        if h_rho <= 0 or sigma <= 0 or not _close(sigma, 1.0 / math.sqrt(2.0 * h_rho)):
            return f"the sigma of the histogram {name!r} differs from 1 / sqrt(2 rho) of its rho {h_rho:.6g}"
    return None


def _measurements(m: Manifest) -> str | None:
    listed = m.get("measurements")
    if not listed:
        return None
    total = 0.0
    for i, entry in enumerate(listed):
        if not isinstance(entry, Mapping) or entry.get("rho") is None:
            continue
        rho, std = _number(entry.get("rho")), _number(entry.get("std"))
        if rho is None or rho < 0 or std is None or std <= 0:
            return f"measurement {i} has a rho or std that is not a finite number (rho >= 0, std > 0)"
        if rho > 0 and not _close(rho, 1.0 / (2.0 * std * std)):
            return f"measurement {i}'s rho {rho:.6g} differs from 1 / (2 std^2) of its std {std:.6g}"
        total += rho
    if m.budget is not None and m.budget.rho is not None and not _at_most(total, m.budget.rho):
        return f"the measurements spend rho {total:.6g}, more than rho {m.budget.rho:.6g}"
    return None


def _share_epsilon(m: Manifest, name: str) -> float:
    """The epsilon of the pure-DP share ``name`` (0 when the manifest has none)."""
    share = _share(m, name)
    return float(_number(share.epsilon) or 0.0) if share is not None else 0.0


def _share(m: Manifest, name: str) -> Any:
    if m.budget is None:
        return None
    try:
        return m.budget.share(name)
    except KeyError:
        return None


# --------------------------------------------------------------------------------------------- file digests

DIGEST_FILE = "SHA256SUMS"
"""The file of a saved release that lists the SHA-256 of each of its other files, one ``<hex>  <path>`` line
per file, paths relative to the release directory (the format ``sha256sum -c`` checks; docs/outputs.md)."""
_DIGEST_CHUNK = 1 << 20


def write_file_digests(directory: str) -> str:
    """Write :data:`DIGEST_FILE` into a release directory: the SHA-256 of every regular file under it (the
    Parquet parts, their ``.crc`` checksum files, the model files and ``manifest.json``), written last by
    :meth:`~spark_dpsynth.release.core.Release.save`.

    Returns:
        The path of the digest file.
    """
    import os

    lines = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/")
            if rel != DIGEST_FILE:
                lines.append(f"{_sha256(os.path.join(root, name))}  {rel}\n")
    path = os.path.join(directory, DIGEST_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path


def check_file_digests(directory: str, *, manifest: bool = False) -> bool:
    """Check the files of a saved release against its :data:`DIGEST_FILE`, naming the first that differs: a file
    swapped from another release together with its checksum file, truncated or edited is refused.

    :meth:`~spark_dpsynth.release.core.Release.load` checks the data files (``manifest=False``) before anything
    is read: every listed file but ``manifest.json``, and no unlisted file in a directory of listed files (an
    extra Parquet part, which Spark would read). It checks ``manifest.json`` (``manifest=True``) after
    :func:`check_release`, so a hand-edited figure is reported by name first, and an edit that keeps every
    relation is still refused.

    Returns:
        True when checked; False for a release written before the digests (no :data:`DIGEST_FILE`): it is read
        with the checks it always had (Parquet footers and schemas, Spark's checksums, :func:`check_release`).

    Raises:
        ReleaseError: naming the damaged, missing or unlisted file, or a malformed digest file.
    """
    import os

    base = os.path.abspath(directory)
    listed = _read_digests(base)
    if listed is None:
        return False
    names = ["manifest.json"] if manifest else [n for n in listed if n != "manifest.json"]
    names.sort(key=lambda rel: (rel.rsplit("/", 1)[-1].startswith((".", "_")), rel))  # data files named first
    for rel in names:
        file = os.path.join(base, *rel.split("/"))
        digest = listed.get(rel)
        if digest is None or not os.path.isfile(file) or os.path.islink(file):
            raise _file_damaged(
                file, f"{DIGEST_FILE} does not list it" if digest is None else "it is missing"
            )
        try:
            found = _sha256(file)
        except OSError as err:
            raise _file_damaged(file, f"unreadable: {os.strerror(err.errno or 0)}") from None
        if found != digest:
            raise _file_damaged(file, f"its SHA-256 is not the one {DIGEST_FILE} lists")
    if not manifest:
        folders = {os.path.dirname(os.path.join(base, *rel.split("/"))) for rel in names} - {base}
        for folder in sorted(folders):
            for name in sorted(os.listdir(folder)):
                file = os.path.join(folder, name)
                rel = os.path.relpath(file, base).replace(os.sep, "/")
                if rel not in listed and not os.path.isdir(file):
                    raise _file_damaged(file, f"{DIGEST_FILE} does not list it")
    return True


def _read_digests(base: str) -> dict[str, str] | None:
    """The relative path -> SHA-256 map of ``base/SHA256SUMS``; None when there is none.

    Raises:
        ReleaseError: the file is unreadable, or a line is not ``<64 hex>  <plain relative path>``.
    """
    import os
    import re

    path = os.path.join(base, DIGEST_FILE)
    if not os.path.lexists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        raise _file_damaged(path, "unreadable") from None
    listed = {}
    for line in text.splitlines():
        found = re.fullmatch(r"([0-9a-f]{64}) [ *](.+)", line)
        rel = found.group(2) if found else ""
        if not found or rel.startswith("/") or ".." in rel.split("/") or "\\" in rel:
            raise _file_damaged(path, "a line is not a SHA-256 and a path inside the release")
        listed[rel] = found.group(1)
    return listed


def _sha256(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_DIGEST_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_damaged(file: str, reason: str) -> ReleaseError:
    return ReleaseError(
        f"the release file {file!r} is damaged or not this release's ({reason}); restore the release "
        "directory as it was written"
    )
