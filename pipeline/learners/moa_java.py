"""MOA in a JVM, for :mod:`streameval.pipeline.learners.moa`: the JVM, MOA's classes a
spec may name and the options it may set, and streameval's own Java loop.

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
* **Loops in Java** (:func:`loops`): the class ``streameval.moa.Loops``, whose source
  and Java 8 bytecode are in ``java/`` (``make java`` builds the one from the other),
  makes a learner's calls for a whole block of rows (test-then-train, or predictions
  only) in one crossing from Python.

>>> sorted(MOA_CLASSIFIERS)[:3]
['AdaptiveRandomForest', 'EFDT', 'HoeffdingAdaptiveTree']
>>> cli_string({"g": 50, "c": 0.01, "b": True, "r": False})
'-g 50 -c 0.01 -b'
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

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
_JAVA_DIR = Path(__file__).parent / "java"
_loops: Any = False  # the Java class of loops(): False until looked up


class MOAUnavailable(SpecError):
    """The ``moa`` extra or a Java runtime is missing."""


def jvm() -> Any:
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


def dense_instance() -> Any:
    """MOA's ``DenseInstance`` class (looked up once)."""
    global _dense
    if _dense is None:
        _dense = jvm().JClass("com.yahoo.labs.samoa.instances.DenseInstance")
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
    jpype = jvm()
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


def loops() -> Any:
    """The Java class ``streameval.moa.Loops`` (MOA's calls over a block of rows; compiled
    beside its source in ``java/``), or ``None`` when it cannot be loaded (the rows then
    go call by call, with the same results)."""
    global _loops
    if _loops is False:
        jpype = jvm()
        try:
            root = jpype.JClass("java.io.File")(str(_JAVA_DIR)).toURI().toURL()
            parent = jpype.JClass("moa.classifiers.Classifier").class_.getClassLoader()
            loader = jpype.JClass("java.net.URLClassLoader")([root], parent)
            _loops = jpype.JClass("streameval.moa.Loops", loader=loader)
        except Exception:  # not installed with the package, or bytecode the JVM refuses
            _loops = None
    return _loops


def serialisation() -> Any:
    """Commons Lang's ``SerializationUtils`` (in MOA's jar): its object stream resolves
    classes with the loader of MOA's jar, which a plain ``java.io.ObjectInputStream``
    called from Python does not."""
    return jvm().JClass("org.apache.commons.lang3.SerializationUtils")


def moa_jar() -> Path:
    """The path of MOA's jar in the installed CapyMOA (found without starting a JVM)."""
    import importlib.util

    spec = importlib.util.find_spec("capymoa")
    if spec is None or not spec.submodule_search_locations:
        raise MOAUnavailable(f"moa: learners need the moa extra ({_INSTALL})")
    return Path(next(iter(spec.submodule_search_locations))) / "jar" / "moa.jar"


if __name__ == "__main__":  # `make java`: the class path to compile the loop against
    import sys

    if sys.argv[1:] != ["--jar"]:
        sys.exit("usage: python -m streameval.pipeline.learners.moa_java --jar")
    print(moa_jar())
