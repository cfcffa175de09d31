"""MOA's classifiers inside streameval: ``moa:HoeffdingTree``, ``moa:NaiveBayes[...]``.

MOA (Java) runs in a JVM started by CapyMOA (the optional extra ``streameval[moa]``
and a Java runtime); both are imported on first use, so the core works without them,
and a missing extra or Java gives one line saying what to install.

* **The instance header** (MOA's schema) is built once, from the first instance the
  learner sees: a feature holding a number is numeric, one holding a ``str`` nominal.
  Nominal values and class labels are added to the header's value lists as they first
  appear (MOA's learners grow their per-value statistics on demand). A feature that
  was not in the first instance is not in the header: MOA does not see it.
* **Values**: a numeric feature takes any real number (``bool`` and NumPy's numbers
  included: ``True`` is 1). **Missing values** (``None``, NaN, a feature absent from
  ``x``, a ``str`` in a numeric feature) are MOA's missing value (NaN): MOA's learners
  skip it, as they do in MOA.
* **Predictions are MOA's own.** The probabilities are MOA's votes, normalised; MOA
  predicts the first class (in header order) of the highest vote, and streameval the
  most probable label, ties to the smallest ``str``: when MOA's choice ties with
  another class, its probability is raised by one ulp (:func:`math.nextafter`), so the
  predicted label is always MOA's. Before any label has been seen no class is known
  and the answer is ``{}`` (MOA, told the classes beforehand, would guess the first).
* **Few crossings into Java**: each learner keeps one MOA instance over one Java
  ``double[]``. A prediction writes the features into it (one crossing) and asks for
  the votes (one); ``learn_one`` of the ``x`` just predicted sets the class in it (one)
  and trains (one). A block of rows crosses once, as one ``double[]``, to streameval's
  own Java loops (:func:`~streameval.pipeline.learners.moa_java.loops`): a batch of
  predictions (the re-evaluation's) gets MOA's votes for each row; a block of
  test-then-train (:meth:`MOAClassifier.predict_learn_many`, which the columnar core
  calls with immediate labels) gets MOA's calls for each row, the same calls in the
  same order as one by one, on the same instance, and every vote back.
* **Checkpoints**: the model pickles as the bytes of Java serialisation
  (``java.io.ObjectOutputStream``) of the header and the learner, as one object, so the
  signed checkpoint of a worker holds it like any other learner.

The names and options a spec may give, and the JVM: :mod:`.moa_java`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable, Sequence
from contextlib import suppress
from itertools import chain
from typing import Any

from river import base as river_base
from streameval.pipeline.failure import StoppedAt
from streameval.pipeline.learners.base import Features, Proba
from streameval.pipeline.learners.mixins import ProbaMixin, check_aligned
from streameval.pipeline.learners.moa_java import (
    MOA_CLASSIFIERS,
    MOAUnavailable,
    cli_string,
    dense_instance,
    jvm,
    loops,
    new_moa_learner,
    serialisation,
)

__all__ = ["MOA_CLASSIFIERS", "MOAClassifier", "MOAUnavailable", "cli_string", "new_moa_learner"]

_NAN = math.nan


class MOAClassifier(ProbaMixin, river_base.Classifier):
    """A MOA classifier behind the streameval learner protocol (see the module docstring).

    ``name`` is a key of :data:`MOA_CLASSIFIERS`, ``options`` MOA's options by letter or
    name (checked when the learner is made), ``seed`` the seed of a randomised learner.
    One learner is not to be shared by threads (it writes one buffer per call).
    """

    def __init__(self, name: str, options: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.name = name
        self.options = dict(options or {})
        self.seed = seed
        self._learner = new_moa_learner(name, self.options, seed)
        self._header: Any = None
        self._features: dict[Hashable, int] = {}  # feature -> attribute index
        self._nominal: dict[int, dict[str, int]] = {}  # attribute -> value -> value index
        self._value_lists: dict[int, Any] = {}  # attribute -> the header's java.util.List
        self._classes: list[Hashable] = []  # class index -> label
        self._class_index: dict[Hashable, int] = {}
        self._last: dict[Hashable, Any] | None = None  # the x whose values the buffer holds

    def __repr__(self) -> str:
        return f"MOAClassifier(moa:{self.name}[{cli_string(self.options)}])"

    # ---------------------------------------------------------------- the header

    def _build_header(self, x: Features) -> None:
        """MOA's instance header of the features of ``x`` (numbers numeric, ``str`` nominal)."""
        jpype = jvm()
        attribute = jpype.JClass("com.yahoo.labs.samoa.instances.Attribute")
        array_list = jpype.JClass("java.util.ArrayList")
        attributes = array_list()
        for i, (key, value) in enumerate(x.items()):
            self._features[key] = i
            if isinstance(value, str):
                values = array_list()
                attributes.add(attribute(str(key), values))
                self._nominal[i], self._value_lists[i] = {}, values
            else:
                attributes.add(attribute(str(key)))
        n = len(self._features)
        class_name = "class"
        while class_name in self._features:
            class_name = "_" + class_name
        class_values = array_list()
        attributes.add(attribute(class_name, class_values))
        self._value_lists[n] = class_values
        instances = jpype.JClass("com.yahoo.labs.samoa.instances.Instances")(
            "streameval", attributes, 0
        )
        instances.setClassIndex(n)
        self._header = jpype.JClass("com.yahoo.labs.samoa.instances.InstancesHeader")(instances)
        self._learner.setModelContext(self._header)
        self._learner.prepareForUse()
        self._learner.resetLearning()
        self._attach()

    def _attach(self) -> None:
        """The objects of the per-instance path, made once per header (and after unpickling).

        ``_instance`` is one MOA instance of the header over ``_buffer``, a Java
        ``double[]`` (its values: MOA's instances keep the array they are given): each
        call writes the buffer in one crossing. The learners of :data:`MOA_CLASSIFIERS`
        keep no reference to an instance they are given (the ensembles train copies,
        kNN's window holds copies), so one instance serves every call. A second one,
        ``_scratch`` over ``_scratch_buffer``, serves the batches of predictions, which
        leave the buffer to the ``learn_one`` that may follow a ``predict_proba_one``.
        """
        jpype = jvm()
        names = tuple(self._features)
        self._take = _getter(names)
        self._codes_at = tuple(self._nominal.items())
        self._class_at = len(names)
        self._buffer = jpype.JArray(jpype.JDouble)(len(names) + 1)
        self._instance = dense_instance()(1.0, self._buffer)
        self._instance.setDataset(self._header)
        self._votes = self._learner.getVotesForInstance
        self._train = self._learner.trainOnInstance
        self._scratch_buffer = jpype.JArray(jpype.JDouble)(len(names) + 1)
        self._scratch = dense_instance()(1.0, self._scratch_buffer)
        self._scratch.setDataset(self._header)

    def _values(self, x: Features, code_of: Callable[[int, Any], float] | None = None) -> list[Any]:
        """MOA's values of ``x``'s features in header order, the class missing (NaN).

        Nominal values are coded by ``code_of`` (default :meth:`_code`, which adds a new
        value to the header); a numeric attribute keeps ``x``'s value as it is
        (:meth:`_write` makes the buffer's numbers of it)."""
        code_of = code_of or self._code
        try:
            values = [*self._take(x), _NAN]
        except KeyError:  # a feature of the header missing from x: a missing value
            values = [*map(x.get, self._features), _NAN]
        for i, codes in self._codes_at:
            value = values[i]
            code = codes.get(value) if value.__class__ is str else None
            values[i] = code if code is not None else code_of(i, value)
        return values

    def _code(self, i: int, value: Any) -> float:
        """The code of ``value`` in nominal attribute ``i`` (a new one is added to the header)."""
        if value is None:
            return _NAN
        codes, text = self._nominal[i], str(value)
        code = codes.get(text)
        if code is None:  # a new nominal value: the header learns it
            code = codes[text] = len(codes)
            self._value_lists[i].add(text)
        return code

    def _known_code(self, i: int, value: Any) -> float:
        """:meth:`_code` of a value the header knows: ``KeyError`` for a new one."""
        return _NAN if value is None else self._nominal[i][str(value)]

    def _write(self, values: list[Any]) -> None:
        """``values`` into the buffer: one crossing, unless a numeric attribute holds
        something else than a number (``None``, a ``str``...: a missing value)."""
        try:
            self._buffer[:] = values
        except TypeError:
            self._buffer[:] = [_number(v) for v in values]

    def _class_code(self, y: Hashable) -> int:
        code = self._class_index.get(y)
        if code is None:
            code = self._class_index[y] = len(self._classes)
            self._classes.append(y)
            self._value_lists[len(self._features)].add(str(y))
        return code

    # ---------------------------------------------------------------- the protocol

    def learn_one(self, x: Features, y: Hashable, *, at: int | None = None, **kwargs: Any) -> None:
        if self._header is None:
            self._build_header(x)
        code = self._class_index.get(y)
        if code is None:
            code = self._class_code(y)
        last, self._last = self._last, None
        if last is not None and last == x:  # predicted just before: the buffer holds x
            self._buffer[self._class_at] = code
        else:
            values = self._values(x)
            values[-1] = code
            self._write(values)
        self._train(self._instance)

    def predict_proba_one(self, x: Features, *, at: int | None = None, **kwargs: Any) -> Proba:
        if self._header is None:
            self._build_header(x)
        if not self._classes:
            return {}
        self._last = None  # until the buffer holds x
        self._write(self._values(x))
        self._last = dict(x)  # test-then-train learns this very x next
        return self._proba(memoryview(self._votes(self._instance)).tolist())

    def predict_proba_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Proba]:
        """``predict_proba_one`` of each instance; the rows cross into Java as one array,
        for MOA's votes in one call (:meth:`_votes_of`; the buffer is left alone)."""
        votes, k = self._batch_votes(xs, at)
        proba = self._proba
        if not k:
            return [{} for _ in xs]
        return [proba(votes[i : i + k]) for i in range(0, len(votes), k)]

    def predict_labels_many(
        self, xs: Sequence[Features], *, at: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Hashable | None]:
        """The label :meth:`predict_proba_many` puts on top, MOA's choice (the first class
        of the highest vote, as :meth:`_proba` finds it), without the probabilities."""
        votes, k = self._batch_votes(xs, at)
        return self._labels(votes, k) if k else [None] * len(xs)

    def _labels(self, votes: list[float], k: int) -> list[Hashable]:
        """MOA's choice in each row of ``k`` votes: ``argmax`` of :meth:`_proba`'s answer."""
        classes = self._classes
        if k == 2:
            first, second = classes
            pairs = zip(votes[::2], votes[1::2], strict=True)
            return [second if b > a else first for a, b in pairs]
        rows = (votes[i : i + k] for i in range(0, len(votes), k))
        return [classes[row.index(max(row))] for row in rows]

    def _batch_votes(
        self, xs: Sequence[Features], at: Sequence[int] | None
    ) -> tuple[list[float], int]:
        """MOA's votes for each of ``xs``, ``k`` per instance one after the other, and
        ``k`` (the classes known; 0: none yet, no votes)."""
        if at is not None:
            check_aligned(xs, at)
        if not xs:
            return [], len(self._classes)
        if self._header is None:
            self._build_header(xs[0])
        if not self._classes:
            return [], 0
        rows = None
        if not self._codes_at:  # numbers only: the features, in header order, in C
            with suppress(KeyError):  # a feature missing from some x: the loop below
                rows = list(chain.from_iterable(map(self._take, xs)))
        if rows is None:
            rows = [v for x in xs for v in self._values(x)[:-1]]
        k = len(self._classes)
        return self._votes_of(_doubles(rows), len(xs), k), k

    def _votes_of(self, flat: Any, n: int, k: int) -> list[float]:
        """MOA's votes for the ``n`` rows of ``flat`` (a Java ``double[]``, each row the
        header's features, the class left out), ``k`` per row (padded with 0 or cut), one
        row after the other.

        The rows go through a second instance of the header (``_scratch``), so that the
        buffer keeps the ``x`` a ``learn_one`` may be about to learn."""
        jpype, width = jvm(), self._class_at
        helper = loops()
        if helper is not None:
            votes = jpype.JArray(jpype.JDouble)(n * k)
            helper.votes(
                self._learner, self._scratch, self._scratch_buffer, flat, width, n, k, votes
            )
            return memoryview(votes).tolist()
        rows, out = memoryview(flat).tolist(), []
        for i in range(0, n * width, width):
            self._scratch_buffer[:] = [*rows[i : i + width], _NAN]
            out += (memoryview(self._votes(self._scratch)).tolist() + [0.0] * k)[:k]
        return out

    def predict_learn_many(self, xs: Sequence[Features], ys: Sequence[Hashable]) -> list[Proba]:
        """``predict_proba_one(x)`` then ``learn_one(x, y)`` for each pair, in order: the
        answers of the predictions. The calls are made in Java, the block of rows crossing
        as one array (:func:`~streameval.pipeline.learners.moa_java.loops`),
        when the block holds no class and no nominal value the header does not know yet
        (a new one changes the header between two calls); else call by call, in Python.

        Raises :class:`~streameval.pipeline.failure.StoppedAt` when the learner raised.
        """
        if not xs:
            return []
        if self._header is None:
            self._build_header(xs[0])
        rows = self._block_rows(xs, ys)
        helper = loops()
        if rows is None or helper is None:
            return self._one_by_one(xs, ys)
        jpype, flat = jvm(), _doubles(rows)
        n, k, width = len(xs), len(self._classes), self._class_at + 1
        votes = jpype.JArray(jpype.JDouble)(n * k)
        failure, step = jpype.JClass("java.lang.Throwable")[1], jpype.JInt[1]
        self._last = None  # the buffer holds the block's rows
        done = helper.testThenTrain(
            self._learner, self._instance, self._buffer, flat, width, n, k, votes, failure, step
        )
        answered = done + (done < n and step[0] == 1)  # it failed to learn a row it answered
        flat_votes, proba = memoryview(votes).tolist(), self._proba
        answers = [proba(flat_votes[i : i + k]) for i in range(0, answered * k, k)]
        if done < n:
            raise StoppedAt(done, ("predict", "learn")[step[0]], failure[0], answers)
        return answers

    def _block_rows(self, xs: Sequence[Features], ys: Sequence[Hashable]) -> list[Any] | None:
        """The values of each ``(x, y)`` in header order, the class code last, one row
        after the other; ``None`` when a class or a nominal value is not in the header."""
        classes = self._class_index
        if not classes:
            return None
        rows: list[Any] = []
        try:
            for x, y in zip(xs, ys, strict=True):
                values = self._values(x, self._known_code)
                values[-1] = classes[y]
                rows += values
        except (KeyError, TypeError):  # new, or unhashable: the call-by-call path says
            return None
        return rows

    def _one_by_one(self, xs: Sequence[Features], ys: Sequence[Hashable]) -> list[Proba]:
        """:meth:`predict_learn_many` call by call."""
        answers: list[Proba] = []
        for done, (x, y) in enumerate(zip(xs, ys, strict=True)):
            try:
                answers.append(self.predict_proba_one(x))
            except Exception as exc:
                raise StoppedAt(done, "predict", exc, answers) from exc
            try:
                self.learn_one(x, y)
            except Exception as exc:
                raise StoppedAt(done, "learn", exc, answers) from exc
        return answers

    def _proba(self, votes: list[float]) -> Proba:
        """MOA's votes as probabilities over the known classes, MOA's choice on top.

        MOA's choice is the first index of the highest vote (``Utils.maxIndex``); when its
        probability ties with another's (or the votes sum to nothing, and the
        probabilities are uniform) it is raised by one ulp.
        """
        classes = self._classes
        k = len(classes)
        if len(votes) != k:
            votes = (votes + [0.0] * k)[:k]
        total = math.fsum(votes)
        scored = 0.0 < total < math.inf
        if k == 2:  # the general case below, spelled out for the most frequent one
            a, b = votes
            pa, pb = (a / total, b / total) if scored else (0.5, 0.5)
            if b > a:
                if pb <= pa:
                    pb = math.nextafter(pa, math.inf)
            elif pa <= pb:
                pa = math.nextafter(pb, math.inf)
            return {classes[0]: pa, classes[1]: pb}
        best = votes.index(max(votes))
        probs = [v / total for v in votes] if scored else [1.0 / k] * k
        if k > 1:
            top, probs[best] = probs[best], -math.inf
            rival = max(probs)
            probs[best] = top if top > rival else math.nextafter(rival, math.inf)
        return dict(zip(classes, probs, strict=True))

    # ---------------------------------------------------------------- pickling

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in _TRANSIENT}
        state["_header"] = None
        state["_java"] = self._java_bytes() if self._header is not None else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        java = state.pop("_java")
        self.__dict__.update(state)
        self._value_lists, self._last = {}, None
        if java is None:
            self._learner = new_moa_learner(self.name, self.options, self.seed)
            return
        jpype = jvm()
        header, learner = serialisation().deserialize(jpype.JArray(jpype.JByte)(java))
        self._header, self._learner = header, learner
        for i in [*self._nominal, len(self._features)]:
            self._value_lists[i] = self._header.attribute(i).getAttributeValues()
        self._attach()

    def _java_bytes(self) -> bytes:
        """Java serialisation of the header and the learner, as one object (they share
        the header's value lists)."""
        jpype = jvm()
        pair = jpype.JArray(jpype.JObject)([self._header, self._learner])
        return bytes(serialisation().serialize(pair))


#: What a pickle leaves out: Java objects (the learner and the header go as Java
#: serialisation) and what :meth:`MOAClassifier._attach` makes again.
_TRANSIENT = frozenset(
    {"_learner", "_value_lists", "_last", "_take", "_codes_at", "_class_at"}
    | {"_buffer", "_instance", "_votes", "_train", "_scratch_buffer", "_scratch"}
)


def _getter(names: tuple[Hashable, ...]) -> Callable[[Features], tuple[Any, ...]]:
    """``x -> tuple of x[name] for name in names`` (``KeyError`` when one is missing)."""
    if len(names) == 1:
        (name,) = names
        return lambda x: (x[name],)
    if not names:
        return lambda x: ()
    return operator.itemgetter(*names)


def _doubles(values: list[Any]) -> Any:
    """``values`` as one Java ``double[]``: one crossing, unless a numeric attribute holds
    something else than a number (``None``, a ``str``...: a missing value, :func:`_number`)."""
    jpype = jvm()
    try:
        return jpype.JArray(jpype.JDouble)(values)
    except TypeError:
        return jpype.JArray(jpype.JDouble)([_number(v) for v in values])


def _number(value: Any) -> float:
    """A numeric attribute's value: the number ``value``, else missing (NaN)."""
    if value is None or isinstance(value, (str, bytes)):
        return _NAN
    try:
        return float(value)
    except (TypeError, ValueError):
        return _NAN
