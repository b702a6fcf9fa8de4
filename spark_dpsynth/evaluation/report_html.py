"""The report's HTML and figure pieces: escaping, tables, number formats, embedded PNG figures and the colors of
the release, synthetic and real series (:mod:`spark_dpsynth.evaluation.report` and
:mod:`spark_dpsynth.evaluation.report_marginals` draw the page with them).

Figures are drawn with matplotlib's Agg renderer (no display, no global pyplot state) and embedded as base64
PNG ``data:`` URIs at :data:`DPI` dots per inch, so the page has no external resource.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "DPI",
    "REAL_COLOR",
    "RELEASE_COLOR",
    "SYNTHETIC_COLOR",
    "as_float",
    "escape",
    "format_number",
    "general",
    "html_table",
    "png_image",
]

RELEASE_COLOR = "#1f77b4"
"""The release's series."""
SYNTHETIC_COLOR = "#ff7f0e"
"""The synthetic table's series."""
REAL_COLOR = "#2ca02c"
"""The real (sensitive) table's series."""
DPI = 96
"""Dots per inch of the embedded figures."""


def format_number(value: Any, kind: str) -> str:
    """A number as the page shows it (``kind``: int, pct (a share), pct100 (already %), dec, dec2, score)."""
    if value is None:
        return "n/a"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "pct":
        return f"{100.0 * value:.2f}%"
    if kind == "pct100":
        return f"{value:.2f}%"
    if kind == "dec2":
        return f"{value:.2f}"
    if kind == "score":
        return f"{value:.1f}"
    return f"{value:.4f}"


def escape(value: Any) -> str:
    """``value`` as HTML text (``str(value)``, escaped)."""
    return html.escape(str(value))


def html_table(header: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """An HTML table of ``header`` and ``rows`` (cells already HTML), with the class ``cls``."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def png_image(fig: Figure, alt: str, ident: str) -> str:
    """The figure as an ``<img>`` with a base64 PNG data URI."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img id="{ident}" alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def general(value: Any) -> str:
    """A number with 4 significant digits, ``n/a`` for None."""
    return "n/a" if value is None else f"{value:.4g}"


def as_float(value: Any) -> float:
    """``value`` as a float, NaN for None (matplotlib leaves a gap)."""
    return float("nan") if value is None else float(value)
