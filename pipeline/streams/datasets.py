"""Dataset specs: :func:`load` resolves every dataset a command or the API names.

The real streams (electricity, covtype, airlines) are described in
:mod:`streameval.pipeline.streams.real` and found, verified or downloaded by
:mod:`streameval.pipeline.streams.locate`: a missing file, a digest mismatch or a failed
download raises :class:`DatasetError` naming the paths looked at, the file and digest
expected and where the data comes from.

Dataset specs (:func:`load`) use the grammar of :mod:`streameval.pipeline.spec`:

* a real dataset, with optional ``n`` (keep the first ``n`` rows);
* a synthetic generator of :mod:`streameval.pipeline.streams.synthetic` with its
  parameters;
* either one with ``shuffle=full`` or ``shuffle=within-class``
  (:mod:`streameval.pipeline.streams.shuffle`); the shuffle's seed is ``shuffle_seed``
  if given, else ``seed`` if given, else 0 (on real datasets ``seed`` means
  nothing else, on generators it also seeds the generator). Truncation by
  ``n`` comes first, then the shuffle. Shuffles remove the drift points.

* a file of the user's, ``csv:PATH[...]`` or ``arff:PATH[...]``
  (:mod:`streameval.pipeline.streams.files`).

``electricity[shuffle=within-class,seed=1]``, ``covtype[n=50000]``,
``markov[p_stay=0.9,n=5000,shuffle=full,shuffle_seed=7]``.

>>> ds = load("sea[n=3,seed=1,shuffle=full]")
>>> ds.name, ds.spec, [i.id for i in ds.iter_instances()]
('sea', 'sea[n=3,seed=1,shuffle=full]', ['0', '1', '2'])
"""

from __future__ import annotations

import os
from typing import Any

from streameval.pipeline.spec import (
    Component,
    SpecError,
    parse_component,
    parse_value,
    take_params,
)
from streameval.pipeline.streams.base import Dataset, DatasetError, Instance
from streameval.pipeline.streams.delay import LabelTimeDelay
from streameval.pipeline.streams.files import is_file_spec, load_file
from streameval.pipeline.streams.locate import ENV_VAR, locate
from streameval.pipeline.streams.real import REAL_DATASETS, CsvSource
from streameval.pipeline.streams.shuffle import SHUFFLE_KINDS, ShuffledSource
from streameval.pipeline.streams.synthetic import GENERATORS, make_synthetic

__all__ = ["ENV_VAR", "REAL_DATASETS", "Dataset", "DatasetError", "Instance", "load", "load_real"]


def load_real(
    name: str, data_dir: str | os.PathLike[str] | None = None, n: int | None = None
) -> Dataset:
    """One of the real datasets, verified; the first ``n`` rows if ``n`` is given."""
    info = REAL_DATASETS.get(name)
    if info is None:
        raise SpecError(f"unknown dataset {name!r} (real: {', '.join(REAL_DATASETS)})")
    path = locate(info, data_dir)
    count = info.n_instances if n is None else min(n, info.n_instances)
    return Dataset(
        name=info.name,
        task="classification",
        classes=list(info.classes),
        positive=info.positive,
        features=list(info.columns),
        categorical=list(info.categorical),
        n_instances=count,
        natural_delay=info.natural_delay,
        source=CsvSource(info, path, n),
        spec=info.name,
        description=f"{info.origin} (read from {path})",
        complete=True,  # verified files without a missing value (tests/test_real_datasets.py)
    )


def load(spec: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Resolve a dataset spec (see the module docstring) into a :class:`Dataset`.

    >>> load("markov[n=4]").n_instances
    4
    >>> load("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    streameval.pipeline.spec.SpecError: unknown dataset 'nope' ...
    """
    if is_file_spec(spec):
        dataset, options = load_file(spec)
        shuffling = {k: parse_value(v) for k, v in options.items()}
        return _shuffled(dataset, dataset.name, shuffling, shuffling.get("seed", 0))
    comp = parse_component(spec)
    params = dict(comp.params)
    shuffling = {k: params.pop(k) for k in ("shuffle", "shuffle_seed") if k in params}
    if comp.name in REAL_DATASETS:
        p = take_params(Component(comp.name, params), {"n": int, "seed": int})
        if p.get("n", 0) < 0:
            raise SpecError(f"{comp.name}: n must be >= 0")
        dataset = load_real(comp.name, data_dir, p.get("n"))
        seed = p.get("seed", 0)
    elif comp.name in GENERATORS:
        dataset = make_synthetic(Component(comp.name, params))
        seed = params.get("seed", 0)
    else:
        known = ", ".join([*REAL_DATASETS, *sorted(GENERATORS)])
        raise SpecError(
            f"unknown dataset {comp.name!r} (known: {known}; your own files: csv:PATH, arff:PATH)"
        )
    dataset.spec = str(comp)
    return _shuffled(dataset, comp.name, shuffling, seed)


def _shuffled(dataset: Dataset, name: str, shuffling: dict[str, Any], seed: Any) -> Dataset:
    """``dataset`` replayed in the order of its ``shuffle`` option, if it has one."""
    shuffling = {k: v for k, v in shuffling.items() if k in ("shuffle", "shuffle_seed")}
    params = take_params(Component(name, shuffling), {"shuffle": str, "shuffle_seed": int})
    kind = params.get("shuffle", "none")
    if kind not in (*SHUFFLE_KINDS, "none"):
        raise SpecError(f"unknown shuffle {kind!r} (allowed: {', '.join(SHUFFLE_KINDS)}, none)")
    if kind == "none":
        return dataset
    if dataset.task != "classification" and kind == "within-class":
        raise SpecError(f"{name}: shuffle=within-class needs a classification stream")
    dataset.source = ShuffledSource(dataset.source, kind, params.get("shuffle_seed", seed))
    dataset.drift_points = []
    if isinstance(dataset.natural_delay, LabelTimeDelay):
        dataset.natural_delay = None  # a row's label time does not follow it to a new position
    return dataset
