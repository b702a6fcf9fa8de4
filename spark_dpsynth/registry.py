"""The registry of methods: every DP mechanism and every synthesizer, by name.

A method has two halves (docs/design.md section 1.2):

* a **mechanism** reads the sensitive DataFrame and returns a :class:`~spark_dpsynth.release.Release` (the only
  code that touches private data and draws privacy noise; :mod:`spark_dpsynth.mechanisms`);
* a **synthesizer** reads only a release and returns a synthetic DataFrame (post-processing, no privacy cost;
  :mod:`spark_dpsynth.synthesizers`).

Each entry names its parameter class and the configuration section made from it (``[aggregate]``,
``[class_conditional]``, ``[archetype]``, ``[synthesize]``): the command line's options, the TOML schema and
``--help`` are generated from this table (:mod:`spark_dpsynth.config`), fitting and sampling dispatch
through it, and a saved release names (manifest ``mechanism`` and ``synthesizers``) what can sample it.

Adding a method is one module and one entry: write ``sample(release, params, spark, *, release_dir=None,
progress=None) -> DataFrame`` in a module of :mod:`spark_dpsynth.synthesizers`, then call
:func:`register_synthesizer` (or add it to :data:`SYNTHESIZERS` below); :mod:`spark_dpsynth.synthesizers.independent`
is a complete example. The entries name their code by import path (``"module:function"``), so importing the
registry loads none of the methods (Spark's Python workers import it through the package).

Example::

    from spark_dpsynth import registry
    release = registry.mechanism("marginals").fit(df, AggregationParams(), DataConfig(), budget=Budget(1.0)).release
    synthetic = registry.resolve_synthesizer(release.manifest).synthesize(release, SynthesisParams(), spark)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_dpsynth.errors import InvalidParameterError, ReleaseError

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release

__all__ = [
    "Fitted",
    "MechanismContext",
    "MechanismSpec",
    "SynthesizerSpec",
    "MECHANISMS",
    "SYNTHESIZERS",
    "mechanism",
    "synthesizer",
    "synthesizers_for",
    "register_mechanism",
    "register_synthesizer",
    "resolve_synthesizer",
]


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Fitted:
    """What a mechanism returns: the release, with everything its synthesizers read (its model included,
    :attr:`~spark_dpsynth.release.core.Release.model_files`), which :meth:`Release.save` writes."""

    release: Release
    """The DP release."""


@dataclass(frozen=True)
class MechanismContext:
    """What a mechanism may use besides the sensitive DataFrame, its parameters and the data configuration."""

    spark: Any
    """The SparkSession (classic or Connect)."""
    progress: Callable[[str], None] | None = None
    """Optional callback receiving one short message per stage."""
    read_public: Callable[[], Any] | None = None
    """Returns the PUBLIC table as a DataFrame, for mechanisms that need one (``needs_public``)."""
    accountant: Any = None
    """The run's :class:`~spark_dpsynth.privacy.accounting.Accountant`, made once at the start of the run from
    the run's :class:`~spark_dpsynth.privacy.budget.Budget` (its noise source is the release's): every share is
    spent and every draw made through it. None: the mechanism makes one for the default budget."""
    protected_n: int | None = None
    """n', already drawn through ``accountant`` at the mechanism's own epsilon_N (the default method's choice,
    :func:`spark_dpsynth.mechanisms.choice.fit_auto`); the mechanism does not draw it again. Only the
    ``marginals`` and ``workload`` mechanisms take it."""


@dataclass(frozen=True)
class MechanismSpec:
    """A registered DP mechanism.

    ``run`` is ``"module:function"`` of a function ``run(df, params, data, context) -> Fitted`` with ``df`` the
    sensitive DataFrame, ``params`` an instance of ``params``, ``data`` a
    :class:`~spark_dpsynth.params.DataConfig` and ``context`` a :class:`MechanismContext`.
    """

    name: str
    """Registry name, also written in the release manifest (``mechanism``)."""
    summary: str
    """One line for ``--help`` and the docs."""
    section: str
    """Configuration section of its parameter class."""
    params: str
    """``"module:Class"`` of its frozen parameter class."""
    run: str
    """``"module:function"`` of its run function (see the class docstring)."""
    synthesizers: tuple[str, ...]
    """Synthesizers that can sample its releases; the first is the default."""
    inherited: Mapping[str, str] = field(default_factory=dict)
    """Parameter field -> ``"section.key"`` of the shared configuration it is taken from (shares of
    ``[aggregate]``, the privacy unit of ``[data]``): those fields are not keys of ``section``. The budget itself
    is no parameter: the run's accountant holds it (:class:`MechanismContext`)."""
    check: str | None = None
    """``"module:function"`` of ``check(params, data)``, raising InvalidParameterError for a data configuration
    the mechanism does not take; called before any data is read."""
    needs_public: bool = False
    """True when it reads a public table (``public_input``/``public_table`` keys of its section)."""
    keeps_rows: bool = False
    """True when its synthetic rows are a person's rows (the evaluation then compares rows, not persons)."""

    def params_class(self) -> type:
        return _load(self.params)  # type: ignore[no-any-return]

    def load_run(self) -> Callable[..., Fitted]:
        return _load(self.run)  # type: ignore[no-any-return]

    def load_check(self) -> Callable[..., None] | None:
        return _load(self.check) if self.check else None

    def fit(
        self,
        df: Any,
        params: Any,
        data: Any = None,
        spark: Any = None,
        *,
        progress: Callable[[str], None] | None = None,
        public: Any = None,
        budget: Any = None,
    ) -> Fitted:
        """Run the mechanism on the sensitive DataFrame ``df``.

        Args:
            df: the sensitive table.
            params: an instance of its parameter class (:meth:`params_class`).
            data: a :class:`~spark_dpsynth.params.DataConfig` (default: every column, as strings).
            spark: the session (default: ``df``'s).
            progress: optional callback receiving one short message per stage.
            public: the public table (a DataFrame), for a mechanism that ``needs_public``.
            budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` (default epsilon 4, delta
                derived, production noise).

        Raises:
            InvalidParameterError: ``params`` is not of its parameter class, a public table is missing, or the
                data configuration is one it does not take.
        """
        from spark_dpsynth.params import DataConfig

        cls = self.params_class()
        if not isinstance(params, cls):
            raise InvalidParameterError(f"params must be a {cls.__name__}, got {type(params).__name__}")
        data = data if data is not None else DataConfig()
        check = self.load_check()
        if check is not None:
            check(params, data)
        if self.needs_public and public is None:
            raise InvalidParameterError(f"the {self.name} mechanism needs a public table (public=...)")
        # the run's one accountant, made as every run makes it (loaded by name, as the methods are)
        release_accountant = _load("spark_dpsynth.mechanisms._discovery:release_accountant")
        context = MechanismContext(
            spark=spark if spark is not None else df.sparkSession,
            progress=progress,
            read_public=(lambda: public) if public is not None else None,
            accountant=release_accountant(budget),
        )
        return self.load_run()(df, params, data, context)


@dataclass(frozen=True)
class SynthesizerSpec:
    """A registered synthesizer: ``sample`` is ``"module:function"`` of
    ``sample(release, params, spark, *, release_dir=None, progress=None) -> DataFrame`` (post-processing: it
    reads the release and, with ``release_dir``, the mechanism's files beside it)."""

    name: str
    """Registry name (``[run] synthesizer``, ``--synthesizer``)."""
    summary: str
    """One line for ``--help`` and the docs."""
    mechanisms: tuple[str, ...]
    """The mechanisms whose releases it reads; the first is the one a pipeline runs before it."""
    sample: str
    """``"module:function"`` of its sample function."""
    section: str = "synthesize"
    """Configuration section of its parameter class."""
    params: str = "spark_dpsynth.params:SynthesisParams"
    """``"module:Class"`` of its parameter class."""

    def params_class(self) -> type:
        return _load(self.params)  # type: ignore[no-any-return]

    def load_sample(self) -> Callable[..., Any]:
        return _load(self.sample)  # type: ignore[no-any-return]

    def synthesize(
        self,
        release: Release,
        params: Any = None,
        spark: Any = None,
        *,
        release_dir: str | None = None,
        progress: Callable[[str], None] | None = None,
        typed: bool = True,
    ) -> Any:
        """Sample a synthetic DataFrame from ``release`` (post-processing: no privacy cost).

        Args:
            release: a release of one of :attr:`mechanisms`.
            params: an instance of its parameter class (default: that class's defaults).
            spark: the session (required: a release is not tied to one).
            release_dir: the saved release's directory, for synthesizers that read the mechanism's own files.
            progress: optional callback receiving short progress messages.
            typed: True (the default, as the command line): the output has the input's schema
                (:func:`~spark_dpsynth.synthesizers._types.restore_types`: codes back in their type, binned
                values drawn inside their bin, identifier columns filled with surrogate keys; docs/design.md
                section 2.8). False: the release's values (strings, bin labels), as the synthesizer emits them.

        Returns:
            The synthetic DataFrame: one row per synthetic record.

        Raises:
            ReleaseError: the release comes from a mechanism this synthesizer cannot read.
        """
        if release.manifest.mechanism not in self.mechanisms:
            raise ReleaseError(
                f"the {self.name!r} synthesizer cannot sample a release of the "
                f"{release.manifest.mechanism!r} mechanism"
            )
        params = params if params is not None else self.params_class()()
        synthetic = self.load_sample()(release, params, spark, release_dir=release_dir, progress=progress)
        if not typed:
            return synthetic
        from spark_dpsynth.synthesizers._types import restore_types

        return restore_types(synthetic, release.manifest, seed=getattr(params, "seed", None))


_M = "spark_dpsynth.mechanisms"
_S = "spark_dpsynth.synthesizers"

MECHANISMS: dict[str, MechanismSpec] = {
    "marginals": MechanismSpec(
        name="marginals",
        summary="DP k-way marginals, k = 1..R, with contribution bounding (Gopi, Mahabadi, Yekhanin; SDS)",
        section="aggregate",
        params="spark_dpsynth.params:AggregationParams",
        run=f"{_M}.marginals:run",
        synthesizers=("model", "sds", "independent"),
        check=f"{_M}.marginals:check_data",
    ),
    "class_conditional": MechanismSpec(
        name="class_conditional",
        summary="noisy (value, class) histograms per attribute over full public domains",
        section="class_conditional",
        params=f"{_M}.class_conditional:ClassConditionalParams",
        run=f"{_M}.class_conditional:run",
        synthesizers=("class_conditional",),
        inherited={
            "number_of_records_epsilon_proportion": "aggregate.number_of_records_epsilon_proportion",
            "label": "evaluate.label",
            "number_of_tuples": "synthesize.target_number_of_records",
        },
        check=f"{_M}.class_conditional:check_data",
    ),
    "archetype": MechanismSpec(
        name="archetype",
        summary="user-level DP person histograms over archetypes learned from a public table",
        section="archetype",
        params=f"{_M}.archetype:ArchetypeParams",
        run=f"{_M}.archetype:run",
        synthesizers=("archetype",),
        inherited={"privacy_unit": "data.privacy_unit"},
        check=f"{_M}.archetype:check_data",
        needs_public=True,
        keeps_rows=True,
    ),
    "workload": MechanismSpec(
        name="workload",
        summary="DP-selected marginals (AIM rounds or an MST preset) measured over the released 1-way domain",
        section="workload",
        params="spark_dpsynth.params:WorkloadParams",
        run=f"{_M}.workload:run",
        synthesizers=("pgm", "independent"),
        inherited={
            "reporting_length": "aggregate.reporting_length",
            "percentile": "aggregate.percentile",
            "number_of_records_epsilon_proportion": "aggregate.number_of_records_epsilon_proportion",
            "bins_epsilon_proportion": "aggregate.bins_epsilon_proportion",
        },
    ),
}
"""Mechanism name -> its entry."""

SYNTHESIZERS: dict[str, SynthesizerSpec] = {
    "model": SynthesizerSpec(
        name="model",
        summary="records drawn from a graphical model fitted to the noisy marginals, raked to them",
        mechanisms=("marginals",),
        sample=f"{_S}.marginals:sample_model",
    ),
    "sds": SynthesizerSpec(
        name="sds",
        summary="SDS's aggregate-seeded sampler over the released k-tuples",
        mechanisms=("marginals",),
        sample=f"{_S}.marginals:sample_sds",
    ),
    "independent": SynthesizerSpec(
        name="independent",
        summary="each column drawn independently from its released 1-way marginal (a baseline)",
        mechanisms=("marginals", "workload"),
        sample=f"{_S}.independent:sample",
    ),
    "class_conditional": SynthesizerSpec(
        name="class_conditional",
        summary="naive-Bayes records from the class-conditional histograms",
        mechanisms=("class_conditional",),
        sample=f"{_S}.class_conditional:sample",
    ),
    "archetype": SynthesizerSpec(
        name="archetype",
        summary="synthetic persons and their rows from the archetype histograms and public profiles",
        mechanisms=("archetype",),
        sample=f"{_S}.archetype:sample",
    ),
    "pgm": SynthesizerSpec(
        name="pgm",
        summary="records sampled from a graphical model estimated from the measured marginals (Private-PGM; the default)",
        mechanisms=("workload",),
        sample=f"{_S}.pgm:sample",
    ),
}
"""Synthesizer name -> its entry."""


def mechanism(name: str) -> MechanismSpec:
    """The mechanism registered as ``name``.

    Raises:
        InvalidParameterError: no mechanism has that name (the message lists the names).
    """
    try:
        return MECHANISMS[name]
    except KeyError:
        raise InvalidParameterError(f"unknown mechanism {name!r}; one of {sorted(MECHANISMS)}") from None


def synthesizer(name: str) -> SynthesizerSpec:
    """The synthesizer registered as ``name``.

    Raises:
        InvalidParameterError: no synthesizer has that name (the message lists the names).
    """
    try:
        return SYNTHESIZERS[name]
    except KeyError:
        raise InvalidParameterError(f"unknown synthesizer {name!r}; one of {sorted(SYNTHESIZERS)}") from None


def synthesizers_for(mechanism_name: str) -> tuple[str, ...]:
    """The synthesizers that read releases of ``mechanism_name``: its own list first, then any other registered
    synthesizer that names it."""
    own = mechanism(mechanism_name).synthesizers
    more = tuple(
        s.name for s in SYNTHESIZERS.values() if mechanism_name in s.mechanisms and s.name not in own
    )
    return own + more


def register_mechanism(spec: MechanismSpec) -> None:
    """Add a mechanism (a name already registered is an error)."""
    if spec.name in MECHANISMS:
        raise InvalidParameterError(f"a mechanism named {spec.name!r} is already registered")
    MECHANISMS[spec.name] = spec


def register_synthesizer(spec: SynthesizerSpec) -> None:
    """Add a synthesizer (a name already registered is an error; its mechanisms must be registered)."""
    if spec.name in SYNTHESIZERS:
        raise InvalidParameterError(f"a synthesizer named {spec.name!r} is already registered")
    for name in spec.mechanisms:
        mechanism(name)
    SYNTHESIZERS[spec.name] = spec


def resolve_synthesizer(manifest: Mapping[str, Any], requested: str | None = None) -> SynthesizerSpec:
    """The synthesizer that samples a release: ``requested`` if given (it must read the release's mechanism),
    else the first synthesizer the release's manifest lists, else its mechanism's default.

    Args:
        manifest: the release's :class:`~spark_dpsynth.release.manifest.Manifest` (or its JSON object).
        requested: a synthesizer name, or None.

    Raises:
        InvalidParameterError: ``requested`` is not a registered synthesizer.
        ReleaseError: ``requested`` cannot read releases of the release's mechanism.
    """
    from spark_dpsynth.release.manifest import Manifest

    m = Manifest.from_json(manifest)
    if requested is not None:
        spec = synthesizer(requested)
        if m.mechanism not in spec.mechanisms:
            raise ReleaseError(
                f"the {requested!r} synthesizer cannot sample a release of the {m.mechanism!r} mechanism; "
                f"use one of {list(synthesizers_for(m.mechanism))}"
            )
        return spec
    for name in m.synthesizers:
        if name in SYNTHESIZERS:
            return SYNTHESIZERS[name]
    return synthesizer(mechanism(m.mechanism).synthesizers[0])
