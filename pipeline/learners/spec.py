"""Learners by name: ``nochange``, ``majority[window=1000]``, ``ta3:ht``, ``tc[alpha=0.01]:nb``.

A learner spec is a model, optionally preceded by wrappers (the grammar of
:mod:`streameval.pipeline.spec`, outermost wrapper first):

* classification models: ``nochange``, ``majority``, ``nb``, ``ht``, ``hat``,
  ``knn``, ``arf``; regression models: ``linreg``, ``htr``, ``mean``;
* MOA's classifiers (the ``moa`` extra, :mod:`streameval.pipeline.learners.moa`):
  ``moa:HoeffdingTree``, ``moa:NaiveBayes``, ``moa:AdaptiveRandomForest[s=10]``, ...,
  MOA's command-line options by letter or name in the brackets;
* wrappers (classification): ``ta`` / ``ta<l>`` (Temporally Augmented with
  ``l`` previous labels, ``n_labels=l``, 1 by default; parameter ``fill``) and
  ``tc`` (Temporal Correction; parameter ``alpha``), which nest: ``ta:tc:nb``.

Parameters in brackets reach the river constructor, but only those on the
model's allow-list (:data:`CLASSIFIERS`, :data:`REGRESSORS`), with their
types checked. The allow-list is the only way in: specs also arrive in Kafka
messages, so nothing outside it is ever imported or called. The one
exceptions: names the operator registered
(:mod:`streameval.pipeline.learners.registry`), and
``import[path=package.module.Class,k=v,...]`` (any class, called
with the other parameters), is refused unless the *local* configuration
passes ``allow_import=True``.

Models of river are wrapped by :mod:`streameval.pipeline.learners.river_adapter`. Trees
and forests split on ``str`` features natively; kNN and linear regression get
them one-hot encoded and the numbers standardised; ``nb`` is
:class:`~streameval.pipeline.learners.naive_bayes.MixedNB` (river's GaussianNB on the
numbers, a categorical likelihood on the strings), because GaussianNB on
one-hot columns breaks down (see that module).
Seeded models (``hat``, ``arf``) take the ``seed`` given to
:func:`build_learner` unless the spec sets one, so that building a spec twice
gives two identical fresh learners (what a drift reset does).

>>> from streameval.pipeline.learners.base import StreamContext
>>> learner = build_learner("ta2[fill=predicted]:tc:ht[grace_period=50]", context=StreamContext())
>>> learner.n_labels, learner.fill, type(learner.model).__name__
(2, 'predicted', 'TemporalCorrection')
>>> learner.model.model.model.grace_period
50
>>> str(learner.clone())  # a fresh, unbound copy, to bind again
'TemporallyAugmented(TemporalCorrection(RiverClassifier(HoeffdingTreeClassifier)))'
>>> learner_lags("ta:tc:nb"), learner_lags("ta3:ht"), learner_lags("nochange")
(1, 3, 0)
"""

from __future__ import annotations

import importlib
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from river import compose, forest, linear_model, neighbors, optim, tree
from streameval.pipeline.learners.base import StreamContext, bind_context
from streameval.pipeline.learners.baselines import Majority, NoChange, TargetMean
from streameval.pipeline.learners.naive_bayes import MixedNB
from streameval.pipeline.learners.registry import REGISTRY
from streameval.pipeline.learners.river_adapter import (
    RiverClassifier,
    RiverRegressor,
    as_learner,
    with_one_hot,
)
from streameval.pipeline.learners.temporal import TemporalCorrection, TemporallyAugmented
from streameval.pipeline.spec import Component, SpecError, split_wrappers, take_params

Task = Literal["classification", "regression"]
Params = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    """The type of one parameter and, optionally, which values it may take."""

    types: type | tuple[type, ...]
    check: Callable[[Any], bool] | None = None
    says: str = ""


def one_of(*choices: str) -> Rule:
    """A ``str`` parameter with a fixed set of values."""
    allowed = frozenset(choices)
    return Rule(str, allowed.__contains__, "one of " + ", ".join(sorted(allowed)))


COUNT = Rule(int, lambda v: v >= 1, "an integer >= 1")
NATURAL = Rule(int, lambda v: v >= 0, "an integer >= 0")
SEED = Rule(int)
FLAG = Rule(bool)
NAMES = Rule(str)  # attribute names separated by ";"
OPEN_UNIT = Rule(float, lambda v: 0.0 < v < 1.0, "in (0, 1)")
UNIT = Rule(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
POSITIVE = Rule(float, lambda v: v > 0.0, "> 0")
NON_NEGATIVE = Rule(float, lambda v: v >= 0.0, ">= 0")


@dataclass(frozen=True)
class Entry:
    """How to build one named model: its allowed parameters and a factory.

    ``build(params, seed)`` receives the checked parameters only.
    """

    build: Callable[[Params, int], Any]
    params: dict[str, Rule] = field(default_factory=dict)
    doc: str = ""


# ---------------------------------------------------------------- river factories

_TREE_PARAMS: dict[str, Rule] = {
    "grace_period": COUNT,
    "max_depth": COUNT,
    "split_criterion": one_of("gini", "info_gain", "hellinger"),
    "delta": OPEN_UNIT,
    "tau": NON_NEGATIVE,
    "leaf_prediction": one_of("mc", "nb", "nba"),
    "nb_threshold": NATURAL,
    "nominal_attributes": NAMES,
    "binary_split": FLAG,
    "max_size": POSITIVE,
    "remove_poor_attrs": FLAG,
    "merit_preprune": FLAG,
}


def _max_features_ok(value: Any) -> bool:
    if isinstance(value, str):
        return value in ("sqrt", "log2")
    if isinstance(value, float):
        return 0.0 < value <= 1.0
    return value >= 1


def _river_kwargs(params: Params) -> Params:
    """``nominal_attributes=day;period`` -> ``["day", "period"]`` (``,`` separates params)."""
    out = dict(params)
    if "nominal_attributes" in out:
        out["nominal_attributes"] = [a for a in str(out["nominal_attributes"]).split(";") if a]
    return out


def _nb(params: Params, seed: int) -> RiverClassifier:
    return RiverClassifier(MixedNB(**params))


def _ht(params: Params, seed: int) -> RiverClassifier:
    return RiverClassifier(tree.HoeffdingTreeClassifier(**_river_kwargs(params)))


def _hat(params: Params, seed: int) -> RiverClassifier:
    kwargs = {"seed": seed, **_river_kwargs(params)}
    return RiverClassifier(tree.HoeffdingAdaptiveTreeClassifier(**kwargs))


def _knn(params: Params, seed: int) -> RiverClassifier:
    # Exact search over a sliding window: deterministic, unlike river's default
    # approximate engine (SWINN), whose window of 1000 is kept as the default.
    engine = neighbors.LazySearch(window_size=params.get("window_size", 1000))
    model = neighbors.KNNClassifier(
        n_neighbors=params.get("n_neighbors", 5),
        weighted=params.get("weighted", True),
        engine=engine,
    )
    return RiverClassifier(with_one_hot(model, scale=True))


def _arf(params: Params, seed: int) -> RiverClassifier:
    kwargs = {"n_models": 10, "seed": seed, **_river_kwargs(params)}
    return RiverClassifier(forest.ARFClassifier(**kwargs))


def _linreg(params: Params, seed: int) -> RiverRegressor:
    kwargs = {k: v for k, v in params.items() if k != "lr"}
    if "lr" in params:
        kwargs["optimizer"] = optim.SGD(params["lr"])
    return RiverRegressor(with_one_hot(linear_model.LinearRegression(**kwargs), scale=True))


def _htr(params: Params, seed: int) -> RiverRegressor:
    # The tree splits on str features natively; its leaf models see the numbers only.
    leaf_model = compose.SelectType(numbers.Number) | linear_model.LinearRegression()
    kwargs = {"leaf_model": leaf_model, **_river_kwargs(params)}
    return RiverRegressor(tree.HoeffdingTreeRegressor(**kwargs))


#: Classification models by name.
CLASSIFIERS: dict[str, Entry] = {
    "nochange": Entry(lambda p, s: NoChange(), doc="Persistent baseline: the last label"),
    "majority": Entry(lambda p, s: Majority(**p), {"window": COUNT}, doc="Majority Class"),
    "nb": Entry(_nb, {"alpha": POSITIVE}, doc="naive Bayes: Gaussian numbers, categorical str"),
    "ht": Entry(_ht, _TREE_PARAMS, doc="river HoeffdingTreeClassifier"),
    "hat": Entry(
        _hat,
        {
            **_TREE_PARAMS,
            "seed": SEED,
            "bootstrap_sampling": FLAG,
            "drift_window_threshold": COUNT,
            "switch_significance": OPEN_UNIT,
        },
        doc="river HoeffdingAdaptiveTreeClassifier",
    ),
    "knn": Entry(
        _knn,
        {"n_neighbors": COUNT, "window_size": COUNT, "weighted": FLAG},
        doc="river KNNClassifier, exact search, standardised features",
    ),
    "arf": Entry(
        _arf,
        {
            "n_models": COUNT,
            "seed": SEED,
            "max_features": Rule(
                (int, float, str), _max_features_ok, "an integer >= 1, a fraction, sqrt or log2"
            ),
            "lambda_value": COUNT,
            "grace_period": COUNT,
            "max_depth": COUNT,
            "split_criterion": _TREE_PARAMS["split_criterion"],
            "delta": OPEN_UNIT,
            "tau": NON_NEGATIVE,
            "leaf_prediction": _TREE_PARAMS["leaf_prediction"],
            "nb_threshold": NATURAL,
            "nominal_attributes": NAMES,
            "disable_weighted_vote": FLAG,
        },
        doc="river ARFClassifier (10 models by default)",
    ),
}

#: Regression models by name.
REGRESSORS: dict[str, Entry] = {
    "linreg": Entry(
        _linreg,
        {"l2": NON_NEGATIVE, "l1": NON_NEGATIVE, "intercept_lr": NON_NEGATIVE, "lr": POSITIVE},
        doc="river LinearRegression, standardised features",
    ),
    "htr": Entry(
        _htr,
        {
            "grace_period": COUNT,
            "max_depth": COUNT,
            "delta": OPEN_UNIT,
            "tau": NON_NEGATIVE,
            "leaf_prediction": one_of("mean", "model", "adaptive"),
            "model_selector_decay": UNIT,
            "nominal_attributes": NAMES,
            "min_samples_split": COUNT,
            "binary_split": FLAG,
        },
        doc="river HoeffdingTreeRegressor",
    ),
    "mean": Entry(lambda p, s: TargetMean(**p), {"window": COUNT}, doc="mean of the targets"),
}

_TA = re.compile(r"^ta(?P<lags>[0-9]*)$")
_TA_PARAMS: dict[str, Rule] = {"fill": one_of("received", "predicted")}
_TC_PARAMS: dict[str, Rule] = {"alpha": UNIT}
_WRAPPERS_HELP = "wrappers: ta, ta<l> (e.g. ta3), tc"
_IMPORT = "import"
_MOA = "moa"
_MOA_HELP = "moa:CLASS[option=value,...], e.g. moa:HoeffdingTree[g=50] (MOA's -g 50)"
#: The most lags ``ta<l>`` may ask for (sect. 6.8 finds nothing to gain beyond 2).
MAX_LAGS = 1000


def _models(task: str) -> dict[str, Entry]:
    if task == "classification":
        return CLASSIFIERS
    if task == "regression":
        return REGRESSORS
    raise SpecError(f"unknown task {task!r} (allowed: classification, regression)")


def learner_names(task: Task = "classification") -> list[str]:
    """The model names of ``task``, sorted.

    >>> learner_names("regression")
    ['htr', 'linreg', 'mean']
    """
    return sorted(_models(task))


def _check(component: Component, rules: dict[str, Rule]) -> Params:
    """The parameters of ``component``, known, of the right type and in range."""
    params = take_params(component, {key: rule.types for key, rule in rules.items()})
    for key, value in params.items():
        rule = rules[key]
        if rule.types is int and isinstance(value, bool):
            raise SpecError(f"{component.name}: parameter {key}={value!r} must be an integer")
        if rule.check is not None and not rule.check(value):
            raise SpecError(f"{component.name}: parameter {key}={value!r} must be {rule.says}")
    return params


def _ta_lags(component: Component) -> int | None:
    """The number of lags of a ``ta``/``ta<l>`` component, ``None`` if not one."""
    m = _TA.match(component.name)
    if m is None:
        return None
    lags = int(m.group("lags") or 1)
    if not 1 <= lags <= MAX_LAGS:
        raise SpecError(f"{component.name}: the number of lags must be in 1..{MAX_LAGS}")
    return lags


def _is_wrapper(component: Component) -> bool:
    return component.name == "tc" or _TA.match(component.name) is not None


def _join_moa(components: list[Component]) -> list[Component]:
    """``moa`` followed by ``CLASS[options]`` as one model component ``moa:CLASS``.

    >>> [str(c) for c in _join_moa(split_wrappers("ta:moa:HoeffdingTree[g=50]"))]
    ['ta', 'moa:HoeffdingTree[g=50]']
    """
    if len(components) < 2 or components[-2].name != _MOA:
        return components
    prefix, model = components[-2], components[-1]
    if prefix.params:
        raise SpecError(f"moa takes no parameters: put MOA's options on the class, {_MOA_HELP}")
    return [*components[:-2], Component(f"{_MOA}:{model.name}", dict(model.params))]


def _split(spec: str, task: str) -> tuple[list[Component], Component]:
    """Wrappers (outermost first) and model of ``spec``, names checked."""
    components = _join_moa(split_wrappers(spec))
    *wrappers, model = components
    if model.name == _MOA:
        raise SpecError(f"{spec!r} names no MOA class: {_MOA_HELP}")
    if model.name.startswith(_MOA + ":"):
        return _split_moa(spec, task, wrappers, model)
    models = _models(task)
    allowed = ", ".join(sorted(models))
    for w in wrappers:
        if not _is_wrapper(w):
            raise SpecError(
                f"{w.name!r} in {spec!r} is not a wrapper ({_WRAPPERS_HELP}); "
                f"only the last component is a model"
            )
        if task != "classification":
            raise SpecError(f"wrapper {w.name!r} is for classification only, task is {task!r}")
    if _is_wrapper(model):
        raise SpecError(f"{spec!r} ends with the wrapper {model.name!r}; add a model: {spec}:ht")
    if model.name != _IMPORT and model.name not in models and REGISTRY.get(model.name) is None:
        registered = REGISTRY.names()
        also = f"; registered on this machine: {', '.join(registered)}" if registered else ""
        raise SpecError(
            f"unknown {task} learner {model.name!r} in {spec!r} "
            f"(allowed: {allowed}{also}; {_WRAPPERS_HELP}; import[path=...] if allowed locally)"
        )
    return wrappers, model


def _split_moa(
    spec: str, task: str, wrappers: list[Component], model: Component
) -> tuple[list[Component], Component]:
    """The checks of :func:`_split` for a ``moa:CLASS`` model (its options are MOA's to check)."""
    from streameval.pipeline.learners.moa import MOA_CLASSIFIERS

    if task != "classification":
        raise SpecError(f"{spec!r}: moa: learners are classifiers, task is {task!r}")
    name = model.name.split(":", 1)[1]
    if name not in MOA_CLASSIFIERS:
        raise SpecError(
            f"unknown MOA classifier {name!r} in {spec!r} "
            f"(allowed: {', '.join(sorted(MOA_CLASSIFIERS))})"
        )
    for w in wrappers:
        if not _is_wrapper(w):
            raise SpecError(f"{w.name!r} in {spec!r} is not a wrapper ({_WRAPPERS_HELP})")
    return wrappers, model


def learner_lags(spec: str, task: Task | None = None) -> int:
    """How many recent labels ``spec`` reads from the stream context (for
    :meth:`~streameval.pipeline.learners.base.StreamContext.require_recent`).

    ``ta<l>`` reads ``l`` labels, ``tc`` one; nested wrappers need the largest;
    plain models none. The spec is checked as by :func:`build_learner`, for
    ``task`` or, if ``None``, for the task its model name belongs to.

    >>> learner_lags("ta2:ta3[fill=predicted]:ht"), learner_lags("tc:nb"), learner_lags("linreg")
    (3, 1, 0)
    """
    if task is None:
        name = split_wrappers(spec)[-1].name
        task = "regression" if name in REGRESSORS else "classification"
    wrappers, _ = _split(spec, task)
    lags = [_ta_lags(w) or 1 for w in wrappers]
    return max(lags, default=0)


def _import_model(component: Component, task: str, allow_import: bool) -> Any:
    if not allow_import:
        raise SpecError(
            "import[...] is disabled: learner specs may come from Kafka messages, which must "
            "never import code; enable allow_import in the local configuration to use it"
        )
    params = dict(component.params)
    path = params.pop("path", None)
    if not isinstance(path, str) or "." not in path:
        raise SpecError("import needs path=package.module.Class")
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        raise SpecError(f"import[path={path}]: {e}") from e
    try:  # imported code may raise anything: the spec is what failed
        obj = cls(**params)
        return as_learner(obj, task)  # type: ignore[arg-type]
    except TypeError as e:
        raise SpecError(f"import[path={path}]: {e}") from e
    except Exception as e:
        raise SpecError(f"import[path={path}]: not a usable learner: {_what(e)}") from e


def _what(exc: BaseException) -> str:
    """``exc`` as its type and message (an empty message says little alone)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _build_model(component: Component, task: str, seed: int, allow_import: bool) -> Any:
    if component.name == _IMPORT:
        return _import_model(component, task, allow_import)
    if component.name.startswith(_MOA + ":"):
        from streameval.pipeline.learners.moa import MOAClassifier

        return MOAClassifier(component.name.split(":", 1)[1], dict(component.params), seed)
    if component.name not in _models(task):
        return REGISTRY.build(component.name, dict(component.params), task)
    entry = _models(task)[component.name]
    params = _check(component, entry.params)
    try:
        return entry.build(params, seed)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{component}: {e}") from e


def _wrap(component: Component, inner: Any) -> Any:
    n_labels = _ta_lags(component)
    if n_labels is not None:
        params = _check(component, _TA_PARAMS)
        return TemporallyAugmented(inner, n_labels=n_labels, **params)
    return TemporalCorrection(inner, **_check(component, _TC_PARAMS))


def build_learner(
    spec: str,
    *,
    context: StreamContext | None,
    task: Task = "classification",
    seed: int = 0,
    allow_import: bool = False,
) -> Any:
    """A fresh learner for ``spec``, bound to ``context`` (its wrappers read the labels).

    The learner is built, then bound with
    :func:`~streameval.pipeline.learners.base.bind_context`. Raises
    :class:`~streameval.pipeline.spec.SpecError` for anything not on the
    allow-lists, naming what is allowed. ``context=None`` leaves it unbound:
    wrappers keep their own label history (immediate labels only).

    >>> build_learner("majority[window=1000]", context=None).window
    1000
    >>> build_learner("svm", context=None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streameval.pipeline.spec.SpecError: unknown classification learner 'svm' in 'svm' ...
    """
    wrappers, model = _split(spec, task)
    learner = _build_model(model, task, seed, allow_import)
    for component in reversed(wrappers):
        learner = _wrap(component, learner)
    if context is not None:
        bind_context(learner, context)
    return learner
