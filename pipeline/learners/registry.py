"""Learners the operator registers by name, so that experiment messages may name them.

Learner specs arrive in Kafka messages, so the built-in allow-list
(:mod:`streameval.pipeline.learners.spec`) is all a message can ask for -- except the
names the *operator* of a worker registers here, never a message:

* the ``streameval.learners`` entry-point group of any installed package
  (``[project.entry-points."streameval.learners"] churn = "mypkg.models:ChurnModel"``),
  read on first use;
* the ``[learners]`` section of the worker's config file
  (``churn = "mypkg.models:ChurnModel"`` or ``"mypkg.models.ChurnModel"``), registered
  by the command line at start-up;
* :func:`register` from Python.

A registered name is a model in every learner spec (``churn``, ``ta:churn``,
``churn[depth=3]``): the spec's parameters are passed to the class as keyword arguments.
Anything with the learner protocol (``learn_one`` with ``predict_proba_many`` or
``predict_many``) or a River classifier or regressor qualifies
(:func:`~streameval.pipeline.learners.river_adapter.as_learner`). A name is checked
(lower case letters, digits, ``_``), never shadows a built-in learner or wrapper, and
the class is imported when the name is registered, so a typo fails at start-up.

>>> from river import tree
>>> registry = LearnerRegistry(entry_points=False)
>>> registry.register("tree", "river.tree:HoeffdingTreeClassifier")
>>> type(registry.build("tree", {"grace_period": 50}, "classification").model).__name__
'HoeffdingTreeClassifier'
>>> registry.register("nb", tree.HoeffdingTreeClassifier)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: learner name 'nb' is a built-in learner ...
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from streameval.pipeline.learners.river_adapter import as_learner
from streameval.pipeline.spec import SpecError

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "LearnerRegistry", "register"]

ENTRY_POINT_GROUP = "streameval.learners"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_RESERVED = re.compile(r"^(ta[0-9]*|tc|import|moa)$")


def _import(path: str) -> Any:
    """The object at ``package.module:Name`` or ``package.module.Name``."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise ValueError(f"{path!r} is not an import path (package.module:Class)")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {path!r}: {exc}") from None


class LearnerRegistry:
    """Operator-registered learner classes by name (see the module docstring)."""

    def __init__(self, *, entry_points: bool = True) -> None:
        self._factories: dict[str, Callable[..., Any]] = {}
        self._origin: dict[str, str] = {}
        self._entry_points_read = not entry_points

    def register(self, name: str, target: str | Callable[..., Any], origin: str = "") -> None:
        """Register ``target`` (a class, a factory, or its import path) as ``name``."""
        from streameval.pipeline.learners.spec import CLASSIFIERS, REGRESSORS

        if not _NAME.match(name):
            raise ValueError(f"learner name {name!r}: use lower case letters, digits and _")
        if name in CLASSIFIERS or name in REGRESSORS or _RESERVED.match(name):
            raise ValueError(f"learner name {name!r} is a built-in learner or wrapper")
        factory = _import(target) if isinstance(target, str) else target
        if not callable(factory):
            raise ValueError(f"learner {name!r}: {target!r} is not a class or factory")
        self._factories[name] = factory
        self._origin[name] = origin or (target if isinstance(target, str) else repr(target))

    def _read_entry_points(self) -> None:
        self._entry_points_read = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name not in self._factories:
                self.register(ep.name, ep.value, origin=f"entry point {ep.value}")

    def get(self, name: str) -> Callable[..., Any] | None:
        """The factory registered as ``name``, or ``None``."""
        if name not in self._factories and not self._entry_points_read:
            self._read_entry_points()
        return self._factories.get(name)

    def names(self) -> list[str]:
        """Every registered name, sorted (entry points included)."""
        if not self._entry_points_read:
            self._read_entry_points()
        return sorted(self._factories)

    def build(self, name: str, params: dict[str, Any], task: str) -> Any:
        """A fresh learner: the class of ``name`` called with ``params``, as a learner."""
        factory = self.get(name)
        if factory is None:
            raise SpecError(f"no learner registered as {name!r}")
        try:
            return as_learner(factory(**params), task)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise SpecError(f"registered learner {name!r}: {exc}") from exc

    def unregister(self, name: str) -> None:
        """Forget ``name`` (tests; a worker never forgets)."""
        self._factories.pop(name, None)
        self._origin.pop(name, None)


#: The process's registry: what the worker's operator registered.
REGISTRY = LearnerRegistry()


def register(name: str, target: str | Callable[..., Any]) -> None:
    """Register a learner class for this process (see the module docstring)."""
    REGISTRY.register(name, target)
