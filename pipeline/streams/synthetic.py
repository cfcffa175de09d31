"""Synthetic streams: river generators, concept switches and a Markov label chain.

Every generator is deterministic for its ``seed``, yields exactly ``n``
instances and uses the instance index as event time (``ts = i``, the
convention of ``delayed-labelling-continuous-reevaluation.txt`` sect. 3 for
streams without a notion of time). Labels are strings (``"0"``, ``"1"``,
...); river's integer feature keys become ``x0``, ``x1``, ...

Names and parameters (``name[k=v,...]``, defaults in brackets):

``sea``
    river ``SEA``: ``n`` [10000], ``seed`` [0], ``variant`` [0] (0-3),
    ``noise`` [0.0] (label noise).
``sea_drift``
    SEA with abrupt or gradual switches of variant at ``drift_at``
    [n/2]: concept ``k`` uses variant ``(variant + k) mod 4``; ``n`` [20000],
    ``width`` [1] (1 = abrupt; else the sigmoid width, as in MOA's
    ConceptDriftStream).
``hyperplane``
    river ``Hyperplane``: ``n``, ``seed``, ``n_features`` [10],
    ``n_drift_features`` [2], ``mag_change`` [0.0] (> 0: incremental drift,
    no drift points), ``noise`` [0.05], ``sigma`` [0.1]. Natural delay 100
    instances (delayed-labelling paper, sect. 5.1).
``agrawal``
    river ``Agrawal``: ``n``, ``seed``, ``function`` [0] (0-9),
    ``perturbation`` [0.0], ``balance`` [false]. ``elevel``, ``car`` and
    ``zipcode`` are categorical. Natural delay 1000 instances (sect. 5.1).
``agrawal_drift``
    Agrawal with switches of classification function (concept ``k`` uses
    ``(function + k) mod 10``). Defaults reproduce the paper's setting
    (sect. 5.1): ``n`` [10000], four drifts at ``drift_at``
    [2000/4000/6000/8000, i.e. every n/5], ``width`` [400].
``led``
    river ``LED``: ``n``, ``seed``, ``noise`` [0.1], ``irrelevant`` [true]
    (17 irrelevant features). River inverts a segment when
    ``0.01 + U <= noise`` (``U`` uniform on [0, 1)), so with probability
    ``noise - 0.01``: 9% at the default 0.1, none below 0.01.
    Natural delay 1000 instances (sect. 5.1).
``led_drift``
    LED with 17 irrelevant features and abrupt switches at ``drift_at``
    [3n/16, 3n/8, 3n/4, i.e. 3750/7500/15000 for the default ``n`` 20000]:
    concept ``k >= 1`` swaps ``min(2k + 1, 7)`` relevant features with
    irrelevant ones (3, 5 then 7, as in sect. 5.1); ``width`` [1].
``markov``
    A label Markov chain: ``k`` [2] classes; each label stays the same with
    probability ``p_stay`` [0.9] (the strength of temporal dependence) and
    otherwise jumps uniformly to one of the ``k - 1`` other classes. The
    stationary class distribution is uniform, so the Persistent classifier
    scores ``P(same) = p_stay`` and the Majority Class about ``1/k``: the
    stream is temporally dependent in the sense of Proposition 7 of
    ``temporal-dependence-evaluation-journal.txt`` iff ``p_stay > 1/k``.
    Features ``x0..x{k-1}``: ``x_j = [j == y] + N(0, noise^2)``, ``noise``
    [1.0], so a learner can beat chance from ``x`` alone. ``n`` [10000],
    ``seed`` [0].
``friedman``
    river ``Friedman`` regression (``task="regression"``): ``n``, ``seed``.
``friedman_drift``
    river ``FriedmanDrift``: ``drift_type`` [lea] (``lea`` needs three
    drift points, ``gra`` and ``gsg`` two), ``drift_at`` [n/4, n/2, 3n/4 for
    lea, n/3, 2n/3 otherwise], ``transition_window`` [0] (gsg only),
    ``n`` [20000], ``seed``.

``drift_at`` is one position or several separated by ``/``
(``sea_drift[drift_at=5000/10000/15000]``). A drift point is the 0-based
index where the new concept starts (abrupt) or where it is drawn with
probability 1/2 (gradual, ``width > 1``); they are exposed as
:attr:`Dataset.drift_points`. Concept ``k`` of a switch is drawn from its own
generator, seeded ``seed + k``.

>>> ds = make_synthetic("markov[k=3,p_stay=0.8,n=5,seed=1]")
>>> ds.classes, ds.features
(['0', '1', '2'], ['x0', 'x1', 'x2'])
>>> [inst.y for inst in ds.iter_instances()]
['0', '0', '0', '0', '1']
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, pairwise
from typing import Any

from streameval.pipeline.spec import Component, SpecError, parse_component, take_params
from streameval.pipeline.streams.base import Dataset, FeatureValue, RecordSource, Target
from streameval.pipeline.streams.delay import DelayModel, InstanceDelay


def _synth() -> Any:
    """River's generators (``river.datasets.synth``), imported when a stream is made: the
    import costs ~0.8 s (``river.datasets`` imports scikit-learn where it is installed),
    which every command line call would otherwise pay."""
    from river.datasets import synth

    return synth


Pair = tuple[dict[str, FeatureValue], Target]
PairFactory = Callable[[], Iterator[Pair]]

_COMMON: dict[str, type | tuple[type, ...]] = {"n": int, "seed": int}
_DRIFT: dict[str, type | tuple[type, ...]] = {"drift_at": (int, str), "width": int}


class GeneratorSource(RecordSource[Pair]):
    """``n`` pairs from a fresh generator at each replay; ``ts`` is the index."""

    def __init__(self, make: PairFactory, n: int) -> None:
        self.make = make
        self.n = n

    def records(self) -> Iterator[tuple[float, Pair]]:
        for i, pair in enumerate(islice(self.make(), self.n)):
            yield float(i), pair

    def decode(self, record: Pair) -> Pair:
        return record

    def label(self, record: Pair) -> Target:
        return record[1]


def _label(y: Any) -> str:
    """river labels as strings: booleans become ``"0"``/``"1"``."""
    return str(int(y)) if isinstance(y, bool) else str(y)


def _feature_name(key: Any) -> str:
    return f"x{key}" if isinstance(key, int) else str(key)


def _river_pairs(
    generator: Iterable[tuple[dict[Any, Any], Any]],
    categorical: frozenset[str] = frozenset(),
    regression: bool = False,
) -> Iterator[Pair]:
    """Convert river ``(x, y)`` pairs: string keys, floats or strings, string labels."""
    for x, y in generator:
        out: dict[str, FeatureValue] = {}
        for key, value in x.items():
            name = _feature_name(key)
            out[name] = str(value) if name in categorical else float(value)
        yield out, (float(y) if regression else _label(y))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def concept_switch(
    concepts: list[Iterator[Pair]], drift_points: list[int], width: int, seed: int
) -> Iterator[Pair]:
    """Draw instance ``i`` from concept ``k``, the number of drifts it has passed.

    Abrupt (``width <= 1``): ``k`` is the number of drift points ``<= i``.
    Gradual: drift ``j`` is passed with probability
    ``1 / (1 + exp(-4 (i - drift_points[j]) / width))``, drifts tried in
    order and the first one not passed stops the count (MOA's nesting of
    ConceptDriftStream).
    """
    rng = random.Random(seed)
    i = 0
    while True:
        k = 0
        for d in drift_points:
            passed = i >= d if width <= 1 else rng.random() < _sigmoid(4.0 * (i - d) / width)
            if not passed:
                break
            k += 1
        yield next(concepts[k])
        i += 1


def _drift_points(value: Any, n: int, default: list[int], name: str) -> list[int]:
    if value is None:
        points = default
    elif isinstance(value, int):
        points = [value]
    else:
        try:
            points = [int(p) for p in str(value).split("/")]
        except ValueError:
            raise SpecError(
                f"{name}: drift_at={value!r} must be a position or positions separated by '/'"
            ) from None
    if not points or any(b <= a for a, b in pairwise(points)):
        raise SpecError(f"{name}: drift points {points} must be increasing")
    if points[0] <= 0 or points[-1] >= n:
        raise SpecError(f"{name}: drift points {points} must lie inside (0, n={n})")
    return points


def _names(prefix: str, k: int) -> list[str]:
    return [f"{prefix}{j}" for j in range(k)]


def _classification(
    comp: Component,
    make: PairFactory,
    n: int,
    classes: list[str],
    features: list[str],
    *,
    categorical: list[str] | None = None,
    natural: DelayModel | None = None,
    drift_points: list[int] | None = None,
    description: str = "",
) -> Dataset:
    return Dataset(
        name=comp.name,
        task="classification",
        classes=classes,
        positive="1" if classes == ["0", "1"] else None,
        features=features,
        categorical=categorical or [],
        n_instances=n,
        natural_delay=natural,
        source=GeneratorSource(make, n),
        drift_points=drift_points or [],
        spec=str(comp),
        complete=True,  # numbers drawn by river's generators
        description=description,
    )


def _sea(comp: Component, drift: bool) -> Dataset:
    allowed = {**_COMMON, "variant": int, "noise": float, **(_DRIFT if drift else {})}
    p = take_params(comp, allowed)
    n = p.get("n", 20_000 if drift else 10_000)
    seed, variant, noise = p.get("seed", 0), p.get("variant", 0), p.get("noise", 0.0)
    if variant not in range(4):
        raise SpecError(f"{comp.name}: variant must be 0..3, got {variant}")
    points = _drift_points(p.get("drift_at"), n, [n // 2], comp.name) if drift else []
    width = p.get("width", 1)

    def make() -> Iterator[Pair]:
        concepts = [
            _river_pairs(_synth().SEA(variant=(variant + k) % 4, noise=noise, seed=seed + k))
            for k in range(len(points) + 1)
        ]
        return concept_switch(concepts, points, width, seed)

    return _classification(
        comp,
        make,
        n,
        ["0", "1"],
        _names("x", 3),
        drift_points=points,
        description="river SEA concepts (Street & Kim), label 1 = True",
    )


def _hyperplane(comp: Component) -> Dataset:
    allowed = {
        **_COMMON,
        "n_features": int,
        "n_drift_features": int,
        "mag_change": float,
        "noise": float,
        "sigma": float,
    }
    p = take_params(comp, allowed)
    n, seed = p.get("n", 10_000), p.get("seed", 0)
    d = p.get("n_features", 10)
    kwargs = {
        "n_features": d,
        "n_drift_features": p.get("n_drift_features", 2),
        "mag_change": p.get("mag_change", 0.0),
        "noise_percentage": p.get("noise", 0.05),
        "sigma": p.get("sigma", 0.1),
    }

    def make() -> Iterator[Pair]:
        return _river_pairs(_synth().Hyperplane(seed=seed, **kwargs))

    return _classification(
        comp,
        make,
        n,
        ["0", "1"],
        _names("x", d),
        natural=InstanceDelay(100),
        description="river Hyperplane; incremental drift when mag_change > 0",
    )


_AGRAWAL_FEATURES = [
    "salary",
    "commission",
    "age",
    "elevel",
    "car",
    "zipcode",
    "hvalue",
    "hyears",
    "loan",
]
_AGRAWAL_CATEGORICAL = ["elevel", "car", "zipcode"]


def _agrawal(comp: Component, drift: bool) -> Dataset:
    allowed = {
        **_COMMON,
        "function": int,
        "perturbation": float,
        "balance": bool,
        **(_DRIFT if drift else {}),
    }
    p = take_params(comp, allowed)
    n, seed = p.get("n", 10_000), p.get("seed", 0)
    function = p.get("function", 0)
    if function not in range(10):
        raise SpecError(f"{comp.name}: function must be 0..9, got {function}")
    perturbation, balance = p.get("perturbation", 0.0), p.get("balance", False)
    default = [n * j // 5 for j in range(1, 5)]
    points = _drift_points(p.get("drift_at"), n, default, comp.name) if drift else []
    width = p.get("width", 400)
    cat = frozenset(_AGRAWAL_CATEGORICAL)

    def make() -> Iterator[Pair]:
        concepts = [
            _river_pairs(
                _synth().Agrawal(
                    classification_function=(function + k) % 10,
                    seed=seed + k,
                    balance_classes=balance,
                    perturbation=perturbation,
                ),
                cat,
            )
            for k in range(len(points) + 1)
        ]
        return concept_switch(concepts, points, width, seed)

    return _classification(
        comp,
        make,
        n,
        ["0", "1"],
        list(_AGRAWAL_FEATURES),
        categorical=list(_AGRAWAL_CATEGORICAL),
        natural=InstanceDelay(1000),
        drift_points=points,
        description="river Agrawal loan applications",
    )


def _led(comp: Component, drift: bool) -> Dataset:
    allowed = {
        **_COMMON,
        "noise": float,
        **({"irrelevant": bool} if not drift else _DRIFT),
    }
    p = take_params(comp, allowed)
    n, seed = p.get("n", 20_000 if drift else 10_000), p.get("seed", 0)
    noise = p.get("noise", 0.1)
    irrelevant = True if drift else p.get("irrelevant", True)
    default = [3 * n // 16, 3 * n // 8, 3 * n // 4]
    points = _drift_points(p.get("drift_at"), n, default, comp.name) if drift else []
    width = p.get("width", 1)

    def make() -> Iterator[Pair]:
        concepts = [
            _river_pairs(
                _synth().LEDDrift(
                    seed=seed + k,
                    noise_percentage=noise,
                    irrelevant_features=irrelevant,
                    n_drift_features=min(2 * k + 1, 7) if k else 0,
                )
            )
            for k in range(len(points) + 1)
        ]
        return concept_switch(concepts, points, width, seed)

    return _classification(
        comp,
        make,
        n,
        [str(c) for c in range(10)],
        _names("x", 24 if irrelevant else 7),
        natural=InstanceDelay(1000),
        drift_points=points,
        description="river LED seven-segment digits",
    )


def markov_pairs(k: int, p_stay: float, noise: float, seed: int) -> Iterator[Pair]:
    """The ``markov`` stream: a sticky label chain with Gaussian class-conditional features."""
    rng = random.Random(seed)
    y = rng.randrange(k)
    first = True
    while True:
        if not first and rng.random() >= p_stay:
            jump = rng.randrange(k - 1)
            y = jump if jump < y else jump + 1
        first = False
        x: dict[str, FeatureValue] = {
            f"x{j}": (1.0 if j == y else 0.0) + rng.gauss(0.0, noise) for j in range(k)
        }
        yield x, str(y)


def _markov(comp: Component) -> Dataset:
    allowed = {**_COMMON, "k": int, "p_stay": float, "noise": float}
    p = take_params(comp, allowed)
    n, seed = p.get("n", 10_000), p.get("seed", 0)
    k, p_stay, noise = p.get("k", 2), p.get("p_stay", 0.9), p.get("noise", 1.0)
    if k < 2:
        raise SpecError(f"markov: k must be >= 2, got {k}")
    if not 0.0 <= p_stay <= 1.0:
        raise SpecError(f"markov: p_stay must be in [0, 1], got {p_stay}")
    if noise < 0:
        raise SpecError(f"markov: noise must be >= 0, got {noise}")

    def make() -> Iterator[Pair]:
        return markov_pairs(k, p_stay, noise, seed)

    return _classification(
        comp,
        make,
        n,
        [str(c) for c in range(k)],
        _names("x", k),
        description=f"Markov label chain, P(same) = p_stay = {p_stay}",
    )


def _friedman(comp: Component, drift: bool) -> Dataset:
    allowed = {**_COMMON}
    if drift:
        allowed.update({"drift_type": str, "drift_at": (int, str), "transition_window": int})
    p = take_params(comp, allowed)
    n, seed = p.get("n", 20_000 if drift else 10_000), p.get("seed", 0)
    points: list[int] = []
    make: PairFactory
    if drift:
        kind = p.get("drift_type", "lea")
        if kind not in ("lea", "gra", "gsg"):
            raise SpecError(f"{comp.name}: drift_type must be lea, gra or gsg, got {kind!r}")
        count = 3 if kind == "lea" else 2
        default = [n * j // (count + 1) for j in range(1, count + 1)]
        points = _drift_points(p.get("drift_at"), n, default, comp.name)
        if len(points) != count:
            raise SpecError(f"{comp.name}: drift_type={kind} needs {count} drift points")
        window = p.get("transition_window", 0)
        try:
            _synth().FriedmanDrift(kind, tuple(points), window, seed)
        except ValueError as exc:
            raise SpecError(f"{comp.name}: {exc}") from None

        def make() -> Iterator[Pair]:
            return _river_pairs(
                _synth().FriedmanDrift(kind, tuple(points), window, seed), regression=True
            )
    else:

        def make() -> Iterator[Pair]:
            return _river_pairs(_synth().Friedman(seed=seed), regression=True)

    return Dataset(
        name=comp.name,
        task="regression",
        classes=[],
        positive=None,
        features=_names("x", 10),
        categorical=[],
        n_instances=n,
        natural_delay=None,
        source=GeneratorSource(make, n),
        drift_points=points,
        spec=str(comp),
        description="river Friedman #1 regression (Friedman 1991)",
    )


GENERATORS: dict[str, Callable[[Component], Dataset]] = {
    "sea": lambda c: _sea(c, drift=False),
    "sea_drift": lambda c: _sea(c, drift=True),
    "hyperplane": _hyperplane,
    "agrawal": lambda c: _agrawal(c, drift=False),
    "agrawal_drift": lambda c: _agrawal(c, drift=True),
    "led": lambda c: _led(c, drift=False),
    "led_drift": lambda c: _led(c, drift=True),
    "markov": _markov,
    "friedman": lambda c: _friedman(c, drift=False),
    "friedman_drift": lambda c: _friedman(c, drift=True),
}


def make_synthetic(spec: str | Component) -> Dataset:
    """Build the synthetic dataset named by ``spec`` (``markov[p_stay=0.9,n=5000]``)."""
    comp = spec if isinstance(spec, Component) else parse_component(spec)
    builder = GENERATORS.get(comp.name)
    if builder is None:
        raise SpecError(
            f"unknown synthetic stream {comp.name!r} (known: {', '.join(sorted(GENERATORS))})"
        )
    n = comp.params.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n < 0:
        raise SpecError(f"{comp.name}: n must be >= 0, got {n}")
    return builder(comp)
