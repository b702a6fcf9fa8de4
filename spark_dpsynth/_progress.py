"""Progress reporting shared by the mechanisms and the synthesizers: one message per stage, logged and passed on.

A stage message is short, human readable, and never holds a true (non-private) statistic: mechanisms report
what they are about to compute and how long it took, not what they found.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["Progress", "report"]

Progress = Callable[[str], None]
"""A progress callback: receives one short message per stage (e.g. ``print`` or ``list.append``)."""


def report(progress: Progress | None, logger: logging.Logger, message: str) -> None:
    """Log ``message`` at INFO on ``logger``, then pass it to ``progress`` when one is given.

    Args:
        progress: the caller's callback, or None.
        logger: the logger of the module that reports (its records carry that module's name).
        message: one line, no trailing newline.
    """
    logger.info(message, stacklevel=2)
    if progress is not None:
        progress(message)
