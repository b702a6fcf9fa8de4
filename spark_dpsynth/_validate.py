"""Small validation helpers shared by the parameter objects (messages name the field, value and range)."""

from __future__ import annotations

import math
from numbers import Real

from spark_dpsynth.errors import InvalidParameterError


def finite(name: str, value: object) -> float:
    """Return ``value`` as a float, or raise if it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        raise InvalidParameterError(f"{name} must be finite, got {value!r}")
    return v


def positive(name: str, value: object) -> float:
    v = finite(name, value)
    if v <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}")
    return v


def open_unit(name: str, value: object) -> float:
    v = finite(name, value)
    if not 0 < v < 1:
        raise InvalidParameterError(f"{name} must be in (0, 1), got {value!r}")
    return v


def integer(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if low is not None and value < low:
        raise InvalidParameterError(f"{name} must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise InvalidParameterError(f"{name} must be <= {high}, got {value!r}")
    return value
