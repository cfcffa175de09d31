"""MOA's classifiers inside streameval: ``moa:HoeffdingTree``, ``moa:NaiveBayes[...]``.

MOA (Java) runs in a JVM started by CapyMOA (the optional extra ``streameval[moa]``
and a Java runtime); both are imported on first use, so the core works without them,
and a missing extra or Java gives one line saying what to install.

* **Names** are allow-listed (:data:`MOA_CLASSIFIERS`): a spec names a MOA class by its
  short name, never a Java class path.
* **Options** are MOA's command-line options by letter or name, in the brackets of the
  spec: ``moa:HoeffdingTree[g=50,c=0.01,b=true]`` is MOA's ``-g 50 -c 0.01 -b``. Only
  integer, float, flag and multiple-choice options are accepted, each checked by MOA
  against its range and choices: an option that names a Java class (a ``ClassOption``)
  is refused, so a spec never makes MOA instantiate a class of its choosing.
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
  and trains (one). A batch of re-evaluation predictions crosses as one ``double[][]``.
* **Checkpoints**: the model pickles as the bytes of Java serialisation
  (``java.io.ObjectOutputStream``) of the header and the learner, as one object, so the
  signed checkpoint of a worker holds it like any other learner.

>>> sorted(MOA_CLASSIFIERS)[:3]
['AdaptiveRandomForest', 'EFDT', 'HoeffdingAdaptiveTree']
>>> cli_string({"g": 50, "c": 0.01, "b": True, "r": False})
'-g 50 -c 0.01 -b'
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from river import base as river_base
from streameval.pipeline.learners.base import Features, Proba
from streameval.pipeline.learners.mixins import ProbaMixin, check_aligned
from streameval.pipeline.spec import SpecError

#: MOA classifiers a spec may name, by their short name: the Java class of each.
MOA_CLASSIFIERS: dict[str, str] = {
    "NaiveBayes": "moa.classifiers.bayes.NaiveBayes",
    "HoeffdingTree": "moa.classifiers.trees.HoeffdingTree",
    "HoeffdingAdaptiveTree": "moa.classifiers.trees.HoeffdingAdaptiveTree",
    "EFDT": "moa.classifiers.trees.EFDT",
    "AdaptiveRandomForest": "moa.classifiers.meta.AdaptiveRandomForest",
    "StreamingRandomPatches": "moa.classifiers.meta.StreamingRandomPatches",
    "OzaBag": "moa.classifiers.meta.OzaBag",
    "LeveragingBag": "moa.classifiers.meta.LeveragingBag",
    "kNN": "moa.classifiers.lazy.kNN",
    "MajorityClass": "moa.classifiers.functions.MajorityClass",
    "NoChange": "moa.classifiers.functions.NoChange",
}

#: Kinds of MOA option a spec may set (never a ``ClassOption``, which names a class).
_OPTION_KINDS = ("IntOption", "FloatOption", "FlagOption", "MultiChoiceOption")
#: Options left out although of an allowed kind: threads make a run irreproducible.
_REFUSED_OPTIONS = frozenset({"numberOfJobs"})
_INSTALL = "pip install 'streameval[moa]'"
_lock = threading.Lock()
_java: Any = None
_dense: Any = None
_NAN = math.nan


class MOAUnavailable(SpecError):
    """The ``moa`` extra or a Java runtime is missing."""


def _jvm() -> Any:
    """The ``jpype`` module, with CapyMOA's JVM (MOA on its class path) started."""
    global _java
    if _java is not None:
        return _java
    with _lock:
        if _java is None:
            try:
                import capymoa  # noqa: F401  (starts the JVM with moa.jar)
                import jpype  # noqa: F401  (a dependency of capymoa)
            except ImportError as e:
                raise MOAUnavailable(
                    f"moa: learners need the moa extra ({_INSTALL}): {e}"
                ) from None
            except Exception as e:  # CapyMOA's own error when it finds no Java
                raise MOAUnavailable(
                    f"moa: learners need a Java runtime (java on the PATH or JAVA_HOME; "
                    f"Debian: apt-get install default-jre-headless): {e}"
                ) from None
            import jpype as module

            _java = module
    return _java


def _dense_instance() -> Any:
    """MOA's ``DenseInstance`` class (looked up once)."""
    global _dense
    if _dense is None:
        _dense = _jvm().JClass("com.yahoo.labs.samoa.instances.DenseInstance")
    return _dense


def cli_string(options: dict[str, Any]) -> str:
    """MOA's command line of ``options`` (letter or name -> value; ``True`` is a flag).

    >>> cli_string({"gracePeriod": 50, "l": "MC"})
    '-gracePeriod 50 -l MC'
    """
    parts = []
    for key, value in options.items():
        if value is True:
            parts.append(f"-{key}")
        elif value is not False:
            parts.append(f"-{key} {value}")
    return " ".join(parts)


def _check_option(name: str, option: Any, key: str, value: Any) -> None:
    """Refuse ``key=value`` unless ``option`` is of an allowed kind and accepts it."""
    kind = type(option).__name__.rsplit(".", 1)[-1]
    if kind not in _OPTION_KINDS or str(option.getName()) in _REFUSED_OPTIONS:
        raise SpecError(f"moa:{name}: option {key!r} ({kind}) may not be set from a spec")
    if kind == "FlagOption":
        if not isinstance(value, bool):
            raise SpecError(f"moa:{name}: option {key} is a flag: true or false")
        option.setValue(value)
        return
    if kind == "MultiChoiceOption":
        labels = [str(label) for label in option.getOptionLabels()]
        if str(value) not in labels:
            raise SpecError(f"moa:{name}: option {key}={value!r} must be one of {labels}")
        option.setChosenLabel(str(value))
        return
    number = (int,) if kind == "IntOption" else (int, float)
    if isinstance(value, bool) or not isinstance(value, number):
        raise SpecError(f"moa:{name}: option {key}={value!r} must be a number ({kind})")
    try:
        option.setValue(value)
    except Exception as e:  # MOA's range check (IllegalArgumentException)
        raise SpecError(f"moa:{name}: option {key}={value!r}: {e}") from None


def new_moa_learner(name: str, options: dict[str, Any], seed: int | None = None) -> Any:
    """A fresh Java learner ``MOA_CLASSIFIERS[name]`` with ``options`` checked and set."""
    java_class = MOA_CLASSIFIERS.get(name)
    if java_class is None:
        raise SpecError(
            f"unknown MOA classifier {name!r} (allowed: {', '.join(sorted(MOA_CLASSIFIERS))})"
        )
    jpype = _jvm()
    learner = jpype.JClass(java_class)()
    by_key: dict[str, Any] = {}
    for option in learner.getOptions().getOptionArray():
        by_key[str(option.getCLIChar())] = option
        by_key[str(option.getName())] = option
    for key, value in options.items():
        option = by_key.get(key)
        if option is None:
            known = sorted(str(o.getName()) for o in learner.getOptions().getOptionArray())
            raise SpecError(f"moa:{name}: unknown option {key!r} (MOA's options: {known})")
        _check_option(name, option, key, value)
    if seed is not None and learner.isRandomizable():
        learner.setRandomSeed(int(seed))
    learner.prepareForUse()
    return learner


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
        jpype = _jvm()
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
        kNN's window holds copies), so one instance serves every call.
        """
        jpype = _jvm()
        names = tuple(self._features)
        self._take = _getter(names)
        self._codes_at = tuple(self._nominal.items())
        self._class_at = len(names)
        self._buffer = jpype.JArray(jpype.JDouble)(len(names) + 1)
        self._instance = _dense_instance()(1.0, self._buffer)
        self._instance.setDataset(self._header)
        self._votes = self._learner.getVotesForInstance
        self._train = self._learner.trainOnInstance

    def _values(self, x: Features) -> list[Any]:
        """MOA's values of ``x``'s features in header order, the class missing (NaN).

        Nominal values are coded; a numeric attribute keeps ``x``'s value as it is
        (:meth:`_write` makes the buffer's numbers of it)."""
        try:
            values = [*self._take(x), _NAN]
        except KeyError:  # a feature of the header missing from x: a missing value
            values = [*map(x.get, self._features), _NAN]
        for i, codes in self._codes_at:
            value = values[i]
            code = codes.get(value) if value.__class__ is str else None
            values[i] = code if code is not None else self._code(i, value)
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
        """``predict_proba_one`` of each instance; the rows cross into Java as one array
        (an instance of the header over each; the buffer is left alone)."""
        if at is not None:
            check_aligned(xs, at)
        if not xs:
            return []
        if self._header is None:
            self._build_header(xs[0])
        if not self._classes:
            return [{} for _ in xs]
        jpype = _jvm()
        rows = [self._values(x) for x in xs]
        try:
            matrix = jpype.JArray(jpype.JDouble, 2)(rows)
        except TypeError:  # a numeric attribute holds something else than a number
            matrix = jpype.JArray(jpype.JDouble, 2)([[_number(v) for v in r] for r in rows])
        dense, header, votes = _dense_instance(), self._header, self._votes
        out = []
        for row in matrix:
            inst = dense(1.0, row)
            inst.setDataset(header)
            out.append(self._proba(memoryview(votes(inst)).tolist()))
        return out

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
        jpype = _jvm()
        header, learner = _serialisation().deserialize(jpype.JArray(jpype.JByte)(java))
        self._header, self._learner = header, learner
        for i in [*self._nominal, len(self._features)]:
            self._value_lists[i] = self._header.attribute(i).getAttributeValues()
        self._attach()

    def _java_bytes(self) -> bytes:
        """Java serialisation of the header and the learner, as one object (they share
        the header's value lists)."""
        jpype = _jvm()
        pair = jpype.JArray(jpype.JObject)([self._header, self._learner])
        return bytes(_serialisation().serialize(pair))


#: What a pickle leaves out: Java objects (the learner and the header go as Java
#: serialisation) and what :meth:`MOAClassifier._attach` makes again.
_TRANSIENT = frozenset(
    {"_learner", "_value_lists", "_last", "_take", "_codes_at", "_class_at"}
    | {"_buffer", "_instance", "_votes", "_train"}
)


def _getter(names: tuple[Hashable, ...]) -> Callable[[Features], tuple[Any, ...]]:
    """``x -> tuple of x[name] for name in names`` (``KeyError`` when one is missing)."""
    if len(names) == 1:
        (name,) = names
        return lambda x: (x[name],)
    if not names:
        return lambda x: ()
    return operator.itemgetter(*names)


def _number(value: Any) -> float:
    """A numeric attribute's value: the number ``value``, else missing (NaN)."""
    if value is None or isinstance(value, (str, bytes)):
        return _NAN
    try:
        return float(value)
    except (TypeError, ValueError):
        return _NAN


def _serialisation() -> Any:
    """Commons Lang's ``SerializationUtils`` (in MOA's jar): its object stream resolves
    classes with the loader of MOA's jar, which a plain ``java.io.ObjectInputStream``
    called from Python does not."""
    return _jvm().JClass("org.apache.commons.lang3.SerializationUtils")
