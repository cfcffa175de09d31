"""What may enter an experiment: the rules for bad input that schemas cannot check.

The Kafka pipeline receives whatever producers write. After each message has
passed its JSON Schema (``schemas/``) and the merge (:mod:`streameval.pipeline.merge`),
:class:`IngestGuard` decides, per stream, what the experiment gets:

* a feature vector with features the stream does not have (its names come
  from the experiment, else from the first feature event), or with none at
  all, is rejected as ``wrong_width``; a feature left out is a missing value
  (JSON cannot carry NaN), not an error;
* a label whose target does not fit the task -- anything but a number on a
  regression stream -- is rejected as ``wrong_target`` (a classification
  stream takes any label, as a string);
* a numeric feature value or regression target of magnitude above
  :data:`MAX_MAGNITUDE` (1e50) is rejected as ``out_of_range``: learners
  square such values, and products of squares (variances, squared errors,
  split criteria), and river raises ``OverflowError`` where ``**`` leaves the
  double range -- its ``HoeffdingTreeRegressor`` from features near 1e75 and
  targets near 1.3e154 on. No measured quantity comes near 1e50; a value that
  large is a corrupted message, and at the bound every learner is safe
  (``tests/test_fuzz_ingest.py`` checks both).
  (The schemas already refuse ``NaN``, infinities and numbers no double holds.);
* features for an instance that was already labelled are rejected
  (``already_labelled``);
* a second label for an instance is rejected as ``duplicate_label``;
* a label for an instance never seen is an *orphan*: it waits (up to
  ``orphan_ttl`` seconds of event time) for its features, and enters right
  after them; when its time is up, or the stream ends, it is rejected as
  ``orphan_label``;
* an event refused before the merge (:meth:`IngestGuard.refuse`: over the byte
  budget, a string too long) is rejected with the refusal's kind; when it was an
  instance's features, the instance's label is rejected with the same kind, at
  once, naming the refusal -- whether it already waits as an orphan or comes later
  (the ids of the last ``remember`` refused instances are kept) -- instead of
  waiting ``orphan_ttl`` for features that will never be admitted.

Event time never goes backwards in what the experiment gets: an admitted event
older than the newest time already admitted enters at that time instead
(counted in ``n_retimed``), as an orphan label enters at its features' time.
The merge of two in-order topics never needs this; an idle release
(:meth:`~streameval.pipeline.merge.EventMerger.release_idle`) or a topic written out of
order does, and without it a waiting period could end before it started (a
label older than its features, a re-prediction older than the first one).

Every rejection names its reason and carries the event and its source (the
topic kind, partition and offset of the message that carried it, when the
caller gave one), for the dead-letter topic. Memory is bounded: the ids of
labelled instances are remembered for the last ``remember`` labels only, and the
orphan labels' bytes (as given to :meth:`IngestGuard.admit`) are counted in
``orphan_nbytes`` for the stream's byte budget.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streameval.pipeline.events import EndOfStream, FeatureEvent, InputEvent, LabelEvent
from streameval.pipeline.merge import Source

#: Largest magnitude of a numeric feature value or regression target that is admitted.
MAX_MAGNITUDE = 1e50


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input event kept out of the experiment, why, and where it was read (if known)."""

    kind: str
    reason: str
    event: InputEvent
    source: Source | None = None

    @classmethod
    def experiment_error(cls, event: InputEvent, source: Source | None, reason: str) -> Rejection:
        """The rejection of the event the experiment failed on (its stream stops)."""
        text = f"the experiment failed on this event and stream {event.stream!r} was stopped"
        return cls("experiment_error", f"{text}: {reason}", event, source)


class IngestGuard:
    """Admit or reject the merged input events of one stream.

    >>> guard = IngestGuard(orphan_ttl=10.0)
    >>> pending = set()
    >>> ok, bad = guard.admit(LabelEvent("s", "7", 0.0, "a", 0), pending.__contains__)
    >>> ok, [r.kind for r in bad]  # an orphan label waits for its features
    ([], [])
    >>> ok, bad = guard.admit(FeatureEvent("s", "7", 1.0, {"x": 1.0}, 1), pending.__contains__)
    >>> [e.kind for e in ok]  # the features, then the label that waited for them
    ['features', 'label']
    """

    def __init__(
        self,
        *,
        orphan_ttl: float = 3600.0,
        remember: int = 100_000,
        feature_names: list[str] | None = None,
        task: str = "classification",
    ) -> None:
        self.orphan_ttl = orphan_ttl
        self.numeric_target = task == "regression"
        self.remember = remember
        self.feature_names = frozenset(feature_names) if feature_names else None
        self._labelled: OrderedDict[str, None] = OrderedDict()
        self._orphans: OrderedDict[str, tuple[float, LabelEvent]] = OrderedDict()
        self._orphan_sources: dict[str, Source | None] = {}
        self._orphan_bytes: dict[str, int] = {}
        self.orphan_nbytes = 0
        self._refused: OrderedDict[str, str] = OrderedDict()  # refused features: id -> kind
        self.counts: dict[str, int] = {}
        self.clock = float("-inf")  # the newest event time admitted
        self.n_retimed = 0

    def _reject(
        self, kind: str, reason: str, event: InputEvent, source: Source | None = None
    ) -> Rejection:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return Rejection(kind, reason, event, source)

    def _expire(self, now: float, rejected: list[Rejection], *, everything: bool = False) -> None:
        while self._orphans:
            uid, (expiry, label) = next(iter(self._orphans.items()))
            if not everything and expiry >= now:
                break
            del self._orphans[uid]
            self.orphan_nbytes -= self._orphan_bytes.pop(uid, 0)
            rejected.append(
                self._reject(
                    "orphan_label",
                    f"label for id {uid!r} whose features never arrived "
                    f"(waited until event time {min(expiry, now):g})",
                    label,
                    self._orphan_sources.pop(uid, None),
                )
            )

    def refuse(
        self,
        kind: str,
        reason: str,
        event: InputEvent,
        is_pending: Callable[[str], bool],
        source: Source | None = None,
    ) -> list[Rejection]:
        """Reject ``event``, refused before the merge; when it is the features of an
        instance not pending, also the label waiting for them (and any later label)."""
        rejected = [self._reject(kind, reason, event, source)]
        if not isinstance(event, FeatureEvent) or is_pending(event.id):
            return rejected
        self._refused[event.id] = kind
        if len(self._refused) > self.remember:
            self._refused.popitem(last=False)
        orphan = self._orphans.pop(event.id, None)
        if orphan is not None:
            self.orphan_nbytes -= self._orphan_bytes.pop(event.id, 0)
            rejected.append(self.refused_label(orphan[1], self._orphan_sources.pop(event.id)))
        return rejected

    def any_refused(self) -> bool:
        """Whether the features of some instance were refused (and not admitted since)."""
        return bool(self._refused)

    def drop_orphans(self) -> int:
        """Forget every orphan label (the stream stopped); return how many there were."""
        n = len(self._orphans)
        self._orphans.clear()
        self._orphan_sources.clear()
        self._orphan_bytes.clear()
        self.orphan_nbytes = 0
        return n

    def was_refused(self, uid: str) -> bool:
        """Whether the features of instance ``uid`` were refused (and not admitted since)."""
        return uid in self._refused

    def refused_label(self, label: LabelEvent, source: Source | None) -> Rejection:
        """Reject the label of an instance whose features were refused (:meth:`refuse`)."""
        kind = self._refused[label.id]
        return self._reject(
            kind, f"label for id {label.id!r} whose features were refused ({kind})", label, source
        )

    def admit(
        self,
        event: InputEvent,
        is_pending: Callable[[str], bool],
        source: Source | None = None,
        nbytes: int = 0,
    ) -> tuple[list[InputEvent], list[Rejection]]:
        """The events to pass to the experiment now, and the rejected ones.

        ``is_pending(id)`` tells whether the experiment is waiting for that
        instance's label; ``source`` is where ``event`` was read, named by its
        rejection if it is rejected; ``nbytes`` its bytes, counted while it waits
        as an orphan.
        """
        rejected: list[Rejection] = []
        if self._orphans:
            self._expire(event.ts, rejected, everything=event.__class__ is EndOfStream)
        if event.__class__ is FeatureEvent:
            return self._admit_features(event, source, rejected), rejected  # type: ignore[arg-type]
        if event.__class__ is LabelEvent:
            return self._admit_label(event, is_pending, source, nbytes, rejected), rejected  # type: ignore[arg-type]
        return [event], rejected

    def admits_pair(self, features: FeatureEvent, label: LabelEvent) -> bool:
        """Admit ``features`` and then ``label``, their instance's label at the same time,
        when :meth:`admit` would pass both as they are and do nothing else; True then, with
        the guard as those two calls leave it. False, with nothing changed, otherwise.

        Those two calls do nothing else when no orphan label expires at their time or waits
        for these features, the features were not refused before, are in range, of the
        stream's width and not older than the newest admitted, the instance has no label
        yet, and the label is a class (a string). The label finds its instance pending: its
        features were admitted just before.

        >>> guard = IngestGuard(feature_names=["v"])
        >>> f = FeatureEvent("s", "1", 2.0, {"v": 1.0}, 0)
        >>> guard.admits_pair(f, LabelEvent("s", "1", 2.0, "a", 1)), guard.clock
        (True, 2.0)
        >>> guard.admits_pair(f, LabelEvent("s", "1", 2.0, "a", 1))  # a second label
        False
        """
        uid, ts, x = features.id, features.ts, features.x
        names = self.feature_names
        orphans = self._orphans
        if orphans and (uid in orphans or next(iter(orphans.values()))[0] < ts):
            return False  # it takes its orphan label, or the oldest orphan expires
        if (
            uid in self._refused
            or self.numeric_target
            or names is None
            or label.id != uid
            or label.ts != ts
            or ts < self.clock
            or label.y.__class__ is not str
            or uid in self._labelled
            or not x
            or not x.keys() <= names
            or _too_large(x.values()) is not None
        ):
            return False
        self.clock = ts
        self._remember(uid)
        return True

    def admits_pairs(self, features: list[FeatureEvent], labels: list[LabelEvent]) -> bool:
        """:meth:`admits_pair` for each pair ``features[i]``, ``labels[i]`` in turn, when
        every one of those calls would be True: True then, with the guard as they leave it.
        False, with nothing changed, when one of them might not be.

        The same rules, checked over the lists: times that never decrease from the clock
        on, ids found once and in neither the refused nor the labelled ids, every label a
        string, every feature vector of the stream's names and in range. Not faster than
        :meth:`admits_pair` per pair (37 and 38 ms for Electricity's 45,312 pairs, most of
        it the values' range): what it saves is its caller's loop
        (:meth:`~streameval.pipeline.paired.PairedAdmission._bulk_pairs`).
        It is cautious where the calls are not: with an orphan label waiting, or more ids
        than it remembers, it says False although the calls might all pass.

        >>> guard = IngestGuard(feature_names=["v"])
        >>> fs = [FeatureEvent("s", str(i), float(i), {"v": 1.0}, 2 * i) for i in range(3)]
        >>> ls = [LabelEvent("s", f.id, f.ts, "a", f.seq + 1) for f in fs]
        >>> guard.admits_pairs(fs, ls), guard.clock, guard.admits_pairs(fs[2:], ls[2:])
        (True, 2.0, False)
        """
        names = self.feature_names
        if self._orphans or self.numeric_target or names is None or not features:
            return False
        ids = [f.id for f in features]
        ts = [f.ts for f in features]
        if len(labels) != len(ids) or not ts[0] >= self.clock:
            return False
        if [lab.id for lab in labels] != ids or [lab.ts for lab in labels] != ts:
            return False
        if not all(map(operator.le, ts, ts[1:])) or len(set(ids)) != len(ids):
            return False
        if {lab.y.__class__ for lab in labels} != {str}:
            return False
        labelled = self._labelled
        if not labelled.keys().isdisjoint(ids) or not self._refused.keys().isdisjoint(ids):
            return False
        xs = [f.x for f in features]
        if not all(xs) or not all(map(names.issuperset, xs)):
            return False
        if any(_too_large(x.values()) is not None for x in xs):
            return False
        self.clock = ts[-1]
        labelled.update(dict.fromkeys(ids))
        while len(labelled) > self.remember:
            labelled.popitem(last=False)
        return True

    def _admit_features(
        self, event: FeatureEvent, source: Source | None, rejected: list[Rejection]
    ) -> list[InputEvent]:
        x = event.x
        big = _too_large(x.values())
        if big is not None:
            reason = f"feature value {big!r} of id {event.id!r}: magnitude above {MAX_MAGNITUDE:g}"
            rejected.append(self._reject("out_of_range", reason, event, source))
            return []
        if self.feature_names is None and x:
            self.feature_names = frozenset(x)
        if not x or not x.keys() <= self.feature_names:  # type: ignore[operator]
            extra = sorted(frozenset(x) - self.feature_names) if self.feature_names else []
            reason = (
                f"feature vector of {len(x)} features, stream has "
                f"{len(self.feature_names or ())} (unknown: {extra[:5]})"
            )
            rejected.append(self._reject("wrong_width", reason, event, source))
            return []
        uid = event.id
        if uid in self._labelled:
            reason = f"features for id {uid!r} after its label"
            rejected.append(self._reject("already_labelled", reason, event, source))
            return []
        event = self._in_time(event)  # type: ignore[assignment]
        if self._refused:
            self._refused.pop(uid, None)  # sent again, and admitted this time
        if uid not in self._orphans:
            return [event]
        label = self._orphans.pop(uid)[1]
        self._orphan_sources.pop(uid, None)
        self.orphan_nbytes -= self._orphan_bytes.pop(uid, 0)
        self._remember(uid)
        return [event, LabelEvent(label.stream, uid, event.ts, label.y, event.seq)]

    def _admit_label(
        self,
        event: LabelEvent,
        is_pending: Callable[[str], bool],
        source: Source | None,
        nbytes: int,
        rejected: list[Rejection],
    ) -> list[InputEvent]:
        y = event.y
        if not self.numeric_target:
            if y.__class__ is not str:  # a class label travels as a string
                event = LabelEvent(event.stream, event.id, event.ts, str(y), event.seq)
        elif not _is_number(y):
            reason = f"label {y!r} for id {event.id!r}: a regression target is a number"
            rejected.append(self._reject("wrong_target", reason, event, source))
            return []
        elif _too_large((y,)) is not None:
            reason = f"target {y!r} for id {event.id!r}: magnitude above {MAX_MAGNITUDE:g}"
            rejected.append(self._reject("out_of_range", reason, event, source))
            return []
        uid = event.id
        if is_pending(uid):
            self._remember(uid)
            return [self._in_time(event)]
        if uid in self._labelled or uid in self._orphans:
            reason = f"second label for id {uid!r}"
            rejected.append(self._reject("duplicate_label", reason, event, source))
        elif uid in self._refused:
            rejected.append(self.refused_label(event, source))
        else:
            self._orphans[uid] = (event.ts + self.orphan_ttl, event)
            self._orphan_sources[uid] = source
            if nbytes:
                self._orphan_bytes[uid] = nbytes
                self.orphan_nbytes += nbytes
        return []

    def _in_time(self, event: FeatureEvent | LabelEvent) -> FeatureEvent | LabelEvent:
        """``event``, moved up to the newest time admitted if it is older."""
        if event.ts >= self.clock:
            self.clock = event.ts
            return event
        self.n_retimed += 1
        if isinstance(event, FeatureEvent):
            return FeatureEvent(event.stream, event.id, self.clock, event.x, event.seq)
        return LabelEvent(event.stream, event.id, self.clock, event.y, event.seq)

    def _remember(self, uid: str) -> None:
        self._labelled[uid] = None
        if len(self._labelled) > self.remember:
            self._labelled.popitem(last=False)

    @property
    def n_orphans(self) -> int:
        return len(self._orphans)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _too_large(values: Iterable[object]) -> float | None:
    """The first number in ``values`` beyond :data:`MAX_MAGNITUDE` (or not finite), if any."""
    for v in values:
        if v.__class__ is float:
            if -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:  # type: ignore[operator]
                continue
            return v  # type: ignore[return-value]
        if v.__class__ is str:
            continue
        if isinstance(v, float):
            if not -MAX_MAGNITUDE <= v <= MAX_MAGNITUDE:  # also catches NaN
                return v
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_MAGNITUDE:
            return float(v)
    return None
