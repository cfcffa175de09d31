"""CapyMOA's own ``prequential_evaluation`` of a MOA learner on a streameval stream.

The peer of ``moa:`` learners: the same rows, written once as an ARFF file whose
header is the one :class:`~streameval.pipeline.learners.moa.MOAClassifier` builds
(attributes in the order of the first instance's features, nominal values and
classes in the order they first appear), read by CapyMOA's ``ARFFStream`` and
evaluated by ``capymoa.evaluation.prequential_evaluation`` -- MOA's own Java loop
(``EfficientEvaluationLoops``) when the learner is a MOA learner. The learner is
the MOA class with MOA's default options, as ``moa:NAME`` has.

>>> from streameval.pipeline.streams.base import Instance
>>> rows = [Instance("0", 0.0, {"a": 1.5, "d": "2"}, "UP"),
...         Instance("1", 1.0, {"a": float("nan"), "d": "1"}, "DOWN")]
>>> print(arff_text(rows))
@relation streameval
@attribute 'a' numeric
@attribute 'd' {'2','1'}
@attribute 'class' {'UP','DOWN'}
@data
1.5,'2','UP'
?,'1','DOWN'
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from streameval.pipeline.streams.base import Instance


def _quoted(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def _cell(value: Any, nominal: bool) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "?"
    return _quoted(value) if nominal else repr(float(value))


def arff_text(instances: Sequence[Instance]) -> str:
    """The ARFF of ``instances`` with ``MOAClassifier``'s header (see the module docstring)."""
    first = instances[0].x
    names = list(first)
    nominal = {k for k, v in first.items() if isinstance(v, str)}
    values: dict[str, dict[str, None]] = {k: {} for k in nominal}
    classes: dict[str, None] = {}
    for inst in instances:
        for k in nominal:
            if inst.x.get(k) is not None:
                values[k].setdefault(str(inst.x[k]), None)
        classes.setdefault(str(inst.y), None)
    lines = ["@relation streameval"]
    for k in names:
        kind = "{" + ",".join(map(_quoted, values[k])) + "}" if k in nominal else "numeric"
        lines.append(f"@attribute {_quoted(k)} {kind}")
    lines.append(f"@attribute {_quoted('class')} {{{','.join(map(_quoted, classes))}}}")
    lines.append("@data")
    for inst in instances:
        cells = [_cell(inst.x.get(k), k in nominal) for k in names]
        lines.append(",".join([*cells, _quoted(inst.y)]))
    return "\n".join(lines)


def capymoa_prequential(
    instances: Sequence[Instance],
    learner: str,
    arff: Path,
    *,
    optimise: bool = True,
    window: int = 1000,
) -> dict[str, Any]:
    """CapyMOA's ``prequential_evaluation`` of MOA's ``learner`` (a key of
    :data:`~streameval.pipeline.learners.moa.MOA_CLASSIFIERS`, default options) on
    ``instances``: its accuracy (a fraction), its predictions (labels, ``None`` for
    none) and the seconds of the evaluation alone (writing the ARFF excluded; ``window``
    sizes CapyMOA's windowed evaluator, which runs alongside)."""
    import time

    from capymoa.base import MOAClassifier
    from capymoa.evaluation import prequential_evaluation
    from capymoa.stream import ARFFStream

    from streameval.pipeline.learners.moa_java import MOA_CLASSIFIERS, jvm

    arff.write_text(arff_text(instances) + "\n")
    stream = ARFFStream(str(arff))
    schema = stream.get_schema()
    model = MOAClassifier(jvm().JClass(MOA_CLASSIFIERS[learner]), schema=schema)
    start, cpu = time.perf_counter(), time.process_time()
    results = prequential_evaluation(
        stream, model, store_predictions=True, optimise=optimise, window_size=window
    )
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    labels = [str(v) for v in schema.get_label_values()]
    predictions = [None if p is None else labels[int(p)] for p in results.predictions()]
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "accuracy": results.cumulative.accuracy() / 100.0,
        "predictions": predictions,
        "n_instances": len(predictions),
    }


def load_rows(dataset: str, limit: int | None, data_dir: str | None) -> list[Instance]:
    """The first ``limit`` instances of a streameval dataset, as a list."""
    from streameval.pipeline.streams.datasets import load

    return list(load(dataset, data_dir=data_dir).iter_instances(limit))


def agreement(ours: Iterable[Any], theirs: Iterable[Any]) -> tuple[int, int]:
    """``(positions where both predicted and agree, positions where both predicted)``."""
    same = both = 0
    for a, b in zip(ours, theirs, strict=True):
        if a is not None and b is not None:
            both += 1
            same += a == b
    return same, both
