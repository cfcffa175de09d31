"""The learner protocol and the stream context that temporal wrappers read.

Every learner, baseline or river model or wrapper, speaks one protocol:

* ``learn_one(x, y, at=...)`` -- learn one labelled instance;
* ``predict_proba_one(x, at=...)`` -- class probabilities for one instance
  (an empty dict when the learner knows no class yet);
* ``predict_proba_many(xs, at=...)`` -- the same for many pending instances
  at once (continuous re-evaluation asks for all due instances in one call).

``at`` is the *arrival index* of the instance (0 for the first instance of the
stream, 1 for the next, ...). Plain learners ignore it; the Temporally
Augmented wrapper needs it to know which labels precede the instance. A
learner used outside an experiment may be called without ``at``: it then
behaves as under the usual test-then-train protocol with immediate labels.

Regression learners implement ``learn_one`` and ``predict_one`` (plus
``predict_many``) with float targets.

The learners of this package are river estimators too (``clone()``,
``_get_params()``, river's ``progressive_val_score``); the wrappers that read
the released labels are told the experiment's :class:`StreamContext` with
:func:`bind_context`, never through their constructor, so that a clone is a
plain, unbound copy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

Features = Mapping[str, Any]
Proba = dict[Hashable, float]


@runtime_checkable
class Classifier(Protocol):
    """What an experiment needs from a stream classifier."""

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None) -> None: ...

    def predict_proba_one(self, x: Features, *, at: int | None = None) -> Proba: ...

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None
    ) -> list[Proba]: ...


@runtime_checkable
class Regressor(Protocol):
    """What an experiment needs from a stream regressor."""

    def learn_one(self, x: Features, y: float, *, at: int | None = None) -> None: ...

    def predict_one(self, x: Features, *, at: int | None = None) -> float | None: ...

    def predict_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None
    ) -> list[float | None]: ...


def argmax(proba: Mapping[Hashable, float]) -> Hashable | None:
    """The most probable label; ties go to the smallest label (by ``str``).

    The tie rule makes predictions independent of dict order, so the
    in-process and the Kafka driver agree to the last prediction.

    >>> argmax({"UP": 0.5, "DOWN": 0.5})
    'DOWN'
    >>> argmax({}) is None
    True
    """
    best: Hashable | None = None
    best_p = float("-inf")
    for label, p in proba.items():
        if p > best_p or (p == best_p and str(label) < str(best)):
            best, best_p = label, p
    return best


def argmax_rows(classes: Sequence[Hashable], values: Any) -> list[Hashable | None]:
    """:func:`argmax` of every row of a probability matrix, vectorised.

    ``values[r, j]`` is the probability of ``classes[j]`` for row ``r``: the
    rows are the dicts ``dict(zip(classes, values[r]))`` and the answers are
    exactly theirs (ties to the smallest label by ``str``, then to the first
    in ``classes``). Rows holding a NaN or an infinity go through
    :func:`argmax` itself.

    >>> import numpy as np
    >>> argmax_rows(["UP", "DOWN"], np.array([[0.5, 0.5], [0.7, 0.3], [np.nan, 0.1]]))
    ['DOWN', 'UP', 'DOWN']
    >>> argmax_rows([], np.zeros((2, 0)))
    [None, None]
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[0]
    if not len(classes):
        return [None] * n
    order = sorted(range(len(classes)), key=lambda j: str(classes[j]))  # stable
    ranked = [classes[j] for j in order]
    best = np.argmax(values[:, order], axis=1).tolist()
    out = list(map(ranked.__getitem__, best))
    finite = np.isfinite(values).all(axis=1)
    if not finite.all():
        for r in np.flatnonzero(~finite).tolist():
            out[r] = argmax(dict(zip(classes, values[r].tolist(), strict=True)))
    return out


class StreamContext:
    """The label history of one stream as the experiment has released it.

    The experiment owns it and tells it about every arrival and every label,
    in stream order; wrappers only read it. Memory is bounded: labels are
    kept by arrival index only for the ``horizon`` most recent arrivals plus
    whatever is still pending is the caller's business (see :meth:`forget_before`).

    >>> ctx = StreamContext(max_recent=2)
    >>> ctx.arrive(); ctx.arrive()
    0
    1
    >>> ctx.receive(0, "a")
    >>> ctx.recent_labels(2), ctx.label_at(0), ctx.label_at(1)
    (['a'], 'a', None)
    """

    #: Whether a learner reads the context: set by :meth:`require_recent`, which every
    #: reader calls when it is bound. An unread context need not be kept up to date.
    read = False

    def __init__(self, max_recent: int = 1) -> None:
        self.n_arrived = 0
        self.n_received = 0
        self._recent: deque[Hashable] = deque(maxlen=max(1, max_recent))
        self._label_at: dict[int, Hashable] = {}

    def require_recent(self, n: int) -> None:
        """Make sure at least ``n`` most recent labels are remembered (a reader's call)."""
        self.read = True
        if self._recent.maxlen is None or self._recent.maxlen < n:
            self._recent = deque(self._recent, maxlen=n)

    @property
    def capacity(self) -> int:
        """How many of the most recent labels are remembered (what the wrappers need)."""
        return self._recent.maxlen or 1

    def arrive(self) -> int:
        """Register a new instance; return its arrival index."""
        index = self.n_arrived
        self.n_arrived += 1
        return index

    def receive(self, at: int, y: Hashable) -> None:
        """The label of the instance that arrived at index ``at`` is now known."""
        self.n_received += 1
        self._recent.append(y)
        self._label_at[at] = y

    def recent_labels(self, n: int) -> list[Hashable]:
        """The ``n`` most recently received labels, newest first."""
        out: list[Hashable] = []
        for y in reversed(self._recent):
            if len(out) == n:
                break
            out.append(y)
        return out

    def label_at(self, at: int) -> Hashable | None:
        """The label of the instance with arrival index ``at``, if received."""
        return self._label_at.get(at)

    def forget_before(self, at: int) -> None:
        """Drop labels of instances that arrived before index ``at``."""
        for key in [k for k in self._label_at if k < at]:
            del self._label_at[key]


def bind_context(learner: Any, context: StreamContext) -> None:
    """Tell ``learner`` which labels the experiment has released, if it asks.

    Calls ``learner.bind(context)`` when the learner has a ``bind`` method (the
    temporal wrappers and the adapters, which pass it on to what they wrap)
    and does nothing otherwise: plain learners read no label history.

    >>> class Reader:
    ...     def bind(self, context):
    ...         self.context = context
    >>> ctx, reader = StreamContext(), Reader()
    >>> bind_context(reader, ctx); reader.context is ctx
    True
    >>> bind_context(object(), ctx)  # nothing to bind
    """
    bind = getattr(learner, "bind", None)
    if bind is not None:
        bind(context)
