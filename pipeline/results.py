"""The results of an experiment, as an object: the document and its views.

:class:`Results` wraps the results document (``DESIGN.md``, *Results JSON*) that
``streameval evaluate --json`` writes: ``to_dict()`` is that document,
``table()`` the text ``evaluate`` prints, ``plot()`` and ``report()`` the plots and
the HTML report. It reads like the document itself (``results["learners"]``).

>>> doc = {"stream": "s", "task": "classification", "n_instances": 2, "n_labelled": 2,
...        "config": {"delay": "0"}, "learners": {"nb": {"accuracy": 0.5, "kappa_per": -1.0}}}
>>> r = Results(doc)
>>> r.metric("kappa_per"), r["n_labelled"]
({'nb': -1.0}, 2)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class Results(Mapping[str, Any]):
    """One experiment's results document, with its table, plots and report."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._doc = document

    def __getitem__(self, key: str) -> Any:
        return self._doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._doc)

    def __len__(self) -> int:
        return len(self._doc)

    @property
    def learners(self) -> dict[str, dict[str, Any]]:
        """Every learner's entry, by name."""
        return self._doc["learners"]

    def metric(self, name: str, estimator: str = "whole") -> dict[str, Any]:
        """One metric of every learner: ``{learner: value}``; ``estimator`` is ``whole``,
        ``window`` or ``fading``."""
        out = {}
        for learner, entry in self.learners.items():
            block = entry if estimator == "whole" else entry.get(estimator, {})
            out[learner] = block.get(name)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The results document, as ``--json`` writes it."""
        return self._doc

    def to_json(self, path: str | Path | None = None) -> str:
        """The document as JSON text, also written to ``path`` when given."""
        text = json.dumps(self._doc, indent=2) + "\n"
        if path is not None:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return text

    def table(self) -> str:
        """The text ``streameval evaluate`` prints: metrics, bins, drift, diagnostics."""
        from streameval.pipeline.report.table import results_text

        return results_text(self._doc).lstrip("\n")

    def plot(self, path: str | Path, kind: str = "binned", **options: Any) -> Path:
        """A PNG: ``binned`` (metric per bin, needs ``reeval_k``) or ``curves`` (metrics
        over time, needs ``snapshot_every``)."""
        from streameval.pipeline.report import plots

        if kind == "binned":
            return plots.plot_binned(self._doc, path, **options)
        if kind == "curves":
            return plots.plot_curves(self._doc, path, **options)
        raise ValueError(f"unknown plot kind {kind!r}: binned or curves")

    def report(self, out_dir: str | Path) -> Path:
        """The self-contained HTML report and its PNG plots in ``out_dir``; its path."""
        from streameval.pipeline.report.html import write_report

        return write_report(self._doc, Path(out_dir))

    def __repr__(self) -> str:
        return self.table()
