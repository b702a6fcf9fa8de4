"""The exceptions raised by spark_dpsynth.

Every error a user can cause is one of these, raised before any data is read when the cause is visible in the
parameters alone. Messages name the field, the value given and the allowed range; they never contain a value
read from the sensitive data (no true count, no true number of records, no attribute value that was not released).
"""

from __future__ import annotations

__all__ = [
    "DPSynthError",
    "InvalidParameterError",
    "SchemaError",
    "ConfigError",
    "BudgetError",
    "ReleaseError",
    "OutputExistsError",
    "SparkSetupError",
    "ModelSizeError",
    "ConditionError",
]


class DPSynthError(Exception):
    """Base class of every error raised on purpose by spark_dpsynth."""


class InvalidParameterError(DPSynthError, ValueError):
    """A parameter is outside its allowed range (e.g. ``epsilon must be > 0, got -1``)."""


class SchemaError(DPSynthError, ValueError):
    """The input table does not have the columns or types the parameters name."""


class ConfigError(DPSynthError, ValueError):
    """A configuration file cannot be read, or a key in it is unknown or has a wrong value."""


class BudgetError(DPSynthError, ValueError):
    """The privacy budget cannot be split as asked (e.g. proportions that sum to 1 or more)."""


class ReleaseError(DPSynthError):
    """A release on disk is missing, incomplete or inconsistent with its manifest."""


class OutputExistsError(DPSynthError):
    """An output (directory, file or catalog table) exists and overwriting was not asked for."""


class SparkSetupError(DPSynthError):
    """Spark cannot be set up as asked (e.g. Delta Lake requested but its jars cannot be loaded)."""


class ModelSizeError(InvalidParameterError):
    """A graphical model would need more cells than the caller allows (its junction tree is too large)."""


class ConditionError(InvalidParameterError):
    """A sampling condition (``where``) or a declared rule (``constraints``) cannot be met: it names a column the
    release does not have, is not a boolean Spark SQL expression, or the model gives it probability zero. The
    message names the expression; expressions are public (written by the user), never data."""
