"""The summary a command prints when it ends: what was spent and released (DP outputs from the manifest), the
evaluation's figures (NOT private) and where the outputs are."""

from __future__ import annotations

import os

from spark_dpsynth.data.publish import OutputStage

__all__ = ["describe_meanings", "describe_person_guarantee", "describe_person_metrics", "summary"]


def describe_meanings(meanings: dict) -> str:  # type: ignore[type-arg]
    """One line of the manifest's ``column_meanings`` (docs/design.md section 2.8): how many columns are codes
    and measurements, and which numeric columns the DP profile decided (names only; DP outputs)."""
    codes = [c for c, e in meanings.items() if e.get("meaning") == "code"]
    measures = [c for c, e in meanings.items() if e.get("meaning") == "measurement"]
    profiled = {c for c, e in meanings.items() if e.get("source") == "dp_profile"}

    def names(cols: list[str]) -> str:
        shown = [c for c in cols if c in profiled]
        if not shown:
            return ""
        more = f", +{len(shown) - 8}" if len(shown) > 8 else ""
        return " (DP profile: " + ", ".join(shown[:8]) + more + ")"

    return f"{len(codes)} codes{names(codes)}, {len(measures)} measurements{names(measures)}"


def describe_person_guarantee(persons: dict) -> str:  # type: ignore[type-arg]
    """The person-level guarantee of an event release, from the manifest's ``persons`` block (public): the
    privacy unit, (epsilon, delta) per person, the cap L and how it was chosen, the row-level budget of the
    events (group privacy over L rows)."""
    source, percentile = persons.get("cap_source"), persons.get("cap_percentile")
    if source == "dp_histogram_percentile":
        how = "percentile" + ("" if percentile is None else f" {percentile:g}") + " of the DP histogram"
    else:
        how = str(source or "given")
    return (
        f"{persons.get('privacy_unit_column')}: epsilon {persons['epsilon']:g} per person, delta "
        f"{persons['delta']:.3g}, events measured on at most {persons['max_rows_per_person']} rows per person "
        f"({how}) at epsilon {persons['event_epsilon_per_row']:.4g}, delta {persons['event_delta_per_row']:.3g} "
        "per row"
    )


def describe_person_metrics(persons: dict) -> str:  # type: ignore[type-arg]
    """One line of the evaluation's ``persons`` metrics (NOT private): persons real / synthetic, the TVD of
    rows per person (public bins), the share of real persons above L and, per distinct column, the shares of
    persons of two rows or more that repeat one of its values and, per column that moves with time, those whose
    offsets from the time base spread beyond the tolerance, and per never-decreasing column those whose value goes
    down in time."""
    tvd, share = persons.get("rows_per_person_tvd"), persons.get("share_above_cap")

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1%}"

    repeats = (
        "".join(
            f", repeating a {c} {pct(r.get('sensitive'))} / {pct(r.get('synthetic'))}"
            for c, r in (persons.get("repeating_persons") or {}).items()
        )
        + "".join(
            f", {c} off its time base {pct(r.get('sensitive'))} / {pct(r.get('synthetic'))}"
            for c, r in (persons.get("offset_persons") or {}).items()
        )
        + "".join(
            f", {c} going down in time {pct(r.get('sensitive'))} / {pct(r.get('synthetic'))}"
            for c, r in (persons.get("decreasing_persons") or {}).items()
        )
        + "".join(
            f", {c} span TVD {'n/a' if t is None else f'{t:.4f}'}"
            for c, t in (persons.get("span_tvd") or {}).items()
        )
    )
    return (
        f"real {persons['persons']['sensitive']:,} / synthetic {persons['persons']['synthetic']:,}, rows-per-person "
        f"TVD {'n/a' if tvd is None else f'{tvd:.4f}'}, share above L={persons['cap']} {pct(share)}{repeats} "
        "(not private)"
    )


def summary(release, metrics: dict | None, out_dir: str, stage: OutputStage | None = None) -> str:  # noqa: ANN001
    m = release.manifest
    lines = [
        "",
        "spark_dpsynth summary" + ("  [TEST MODE: NOT PRIVATE]" if m.get("test_mode") else ""),
        f"  privacy spent          epsilon={m['epsilon']:g} delta={m['delta']:.3g}"
        + (f" (rho={m['rho']:.4g})" if "rho" in m else f" ({m.get('synthesizer', 'release')})"),
        f"  protected n            {m['protected_number_of_records']}",
        "  released tuples        " + ", ".join(f"k={k}: {n}" for k, n in release.sizes().items()),
        "  sensitivities          "
        + ", ".join(f"k={k}: {v}" for k, v in (m.get("sensitivities") or {}).items()),
    ]
    if release.manifest.mechanism == "workload":
        lines[5:6] = [
            f"  measured marginals     {len(release.measurements)} in {len(m['rounds'])} rounds "
            f"({m['selection']} selection)"
        ]
    if release.manifest.mechanism == "archetype":
        lines[3:6] = [
            f"  privacy unit           {m.get('privacy_unit_column') or m['privacy_unit']}",
            f"  protected persons      {m['protected_number_of_persons']} (records {m['protected_number_of_records']})",
            "  person histograms      "
            + ", ".join(f"{h}: {d['bins']} bins, sigma {d['sigma']:.3g}" for h, d in m["histograms"].items()),
        ]
    persons = m.get("persons")
    if persons:
        lines[2] = f"  privacy unit           {describe_person_guarantee(persons)}"
        lines.insert(3, f"  protected persons      {persons.get('protected_number_of_persons')}")
    choice = m.get("mechanism_choice")
    if choice:
        lines.insert(3, f"  mechanism (auto)       {choice['mechanism']}: {choice['reason']}")
    meanings = m.get("column_meanings") or {}
    if meanings:
        lines.append(f"  column meanings        {describe_meanings(meanings)}")
    if metrics is not None:
        tvd = metrics.get("tvd") or {}
        lengths = [k for k in sorted(tvd, key=int) if isinstance(tvd[k], dict)]
        lines.append("  mean TVD (1/2/3-way)   " + " / ".join(f"{tvd[k]['mean']:.4f}" for k in lengths))
        if lengths and tvd[lengths[0]].get("floor") is not None:
            measured = all(tvd[k].get("floor_measured") is not None for k in lengths)
            lines.append(
                "  sampling error (floor) "
                + " / ".join(f"{tvd[k]['floor_measured' if measured else 'floor']:.4f}" for k in lengths)
                + (
                    " (TVD of two disjoint uniform samples of the sensitive table)"
                    if measured
                    else " (expected TVD of two uniform samples of these sizes of one table)"
                )
            )
        from spark_dpsynth.evaluation.metrics import describe_out_of_support, describe_real_sample

        worth = describe_real_sample(metrics)
        if worth:
            lines.append(
                f"  worth in real records  {worth} (a uniform sample of that many real records is expected "
                "to be as close)"
            )

        lines += [f"  out-of-support values  {line}" for line in describe_out_of_support(metrics)]
        from spark_dpsynth.evaluation.metrics import describe_row_sampling, describe_sampling

        lines += [f"  subsets compared       {line}" for line in describe_sampling(metrics)]
        lines += [f"  rows compared          {line}" for line in describe_row_sampling(metrics)]
        lines.append(f"  synthetic rows         {metrics['rows']['synthetic']}")
        if metrics.get("persons"):
            lines.append(f"  persons                {describe_person_metrics(metrics['persons'])}")
        blank = metrics.get("blank_cell_share") or {}
        if blank.get("synthetic") is not None and blank.get("sensitive") is not None:
            lines.append(
                f"  blank-cell share       synthetic {blank['synthetic']:.4f} / sensitive {blank['sensitive']:.4f}"
            )
        if metrics.get("k_marginal_score") is not None:
            lines.append(
                f"  3-way k-marginal score {metrics['k_marginal_score']:.1f} / 1000 (1 - mean 3-way TVD)"
            )
        if metrics.get("nist_k_marginal_score") is not None:
            groups = "-".join((metrics.get("nist_k_marginal") or {}).get("group_columns") or []) or "no group"
            lines.append(
                f"  NIST k-marginal score  {metrics['nist_k_marginal_score']:.1f} / 1000 (SDNist 2.4's formula, "
                f"{groups} x 2-way)"
            )
        sds = (metrics.get("sds") or {}).get("synthetic", {}).get("summary")
        if sds:
            lines.append(
                f"  synthetic vs true      preservation {sds['preservation'] or 0:.4f}, leakage count "
                f"{sds['leakage_count']} (resolution {metrics.get('resolution')})"
            )
        tstr = metrics.get("tstr")
        if tstr and tstr.get("failed"):
            pass  # listed under FAILED METRIC below
        elif tstr and not tstr.get("skipped"):
            lines.append(
                f"  TSTR ({tstr['label']})".ljust(25)
                + f"accuracy {tstr['tstr_accuracy']:.4f} (train on real {tstr['trtr_accuracy']:.4f}), "
                f"F1 {tstr['tstr_f1']:.4f} (train on real {tstr['trtr_f1']:.4f})"
            )
        elif tstr:
            lines.append(f"  TSTR ({tstr['label']})".ljust(25) + f"skipped: {tstr['skipped']}")
        numeric = metrics.get("numeric")
        if numeric and numeric.get("worst"):
            lines.append(
                "  worst numeric columns  "
                + ", ".join(f"{c} KS {numeric['by_column'][c]['ks']:.3f}" for c in numeric["worst"])
            )
        for name, reason in (metrics.get("failed_metrics") or {}).items():
            lines.append(f"  FAILED METRIC          {name}: {reason} (the other metrics are written)")
        report = os.path.join(os.path.abspath(out_dir), "evaluation", "report.html")
        lines.append(f"  report (NOT private)   {report}")
    identifiers = list(m.get("identifier_columns") or {})
    if identifiers:
        lines.append(
            f"  identifier columns     {', '.join(identifiers)}: left out of the measurement by configuration, "
            "synthetic surrogate keys"
        )
    from spark_dpsynth.evaluation.persons import row_level_identifier_note

    note = row_level_identifier_note(m)
    if note:
        lines.append(f"  note: {note}")
    from spark_dpsynth.evaluation.coverage import column_warnings

    warnings = column_warnings(release, metrics)
    lines += [f"  EMPTY COLUMN           {line}" for line in warnings]
    from spark_dpsynth.evaluation.persons import empty_columns_note

    persons_note = empty_columns_note(m, len(warnings))
    if persons_note:
        lines.append(f"  note: {persons_note}")
    entries = (
        stage.published if stage is not None else ["release", "synthetic", "synthetic.csv", "evaluation"]
    )
    shown = [f"{os.path.abspath(out_dir)}/{{{','.join(entries)}}}"] if entries else []
    tables = [f"table {t}" for t in stage.published_tables] if stage is not None else []
    lines.append("  outputs                " + ", ".join([*shown, *tables]))
    return "\n".join(lines)
