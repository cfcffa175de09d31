"""An experiment definition checked in C: the common form of the experiments topic as a
``msgspec`` type.

``run`` checks the definition it submits, and the worker the one it reads; jsonschema does
it in ~0.1 ms, but its first use imports it: 30-45 ms of CPU on ``run``'s critical path,
before it forks its replay. :func:`in_common_form` accepts
a definition when every property it has is one ``experiments.json`` names, with a value of
the narrower form below; every definition it accepts, the schema accepts. Any other is
checked by jsonschema, which finds its reason (:func:`streameval.schemas.validate`), so the
reasons are the schema's own:

* ``stream`` a string of 1 to :data:`~streameval.schemas.MAX_ID_LENGTH` characters,
  ``learners`` a non-empty list of distinct non-empty strings;
* the schema's types and bounds for the rest, integers of 64 bits (JSON's ``3.0`` is an
  integer to the schema, and goes the long way here), ``fading`` in ``(0, 1]``;
* no other property (the schema allows them, and refuses NaN inside them).

>>> in_common_form({"stream": "s", "learners": ["nb", "ta:ht"], "window": 1000})
True
>>> in_common_form({"stream": "s", "learners": ["nb", "nb"]})  # not distinct
False
>>> in_common_form({"stream": "s", "learners": ["nb"], "note": "mine"})  # the schema decides
False
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from streameval.schemas import MAX_ID_LENGTH

__all__ = ["ExperimentForm", "in_common_form"]

# Annotated[...] and Union[...] are evaluated at run time by msgspec: no PEP 604 here
Stream = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH)]
Name = Annotated[str, msgspec.Meta(min_length=1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Count0 = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
Count1 = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
Fading = Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]


class ExperimentForm(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An experiment definition in the common form (the defaults are never read)."""

    stream: Stream
    learners: Annotated[list[Name], msgspec.Meta(min_length=1)]
    dataset: Union[str, None] = None  # noqa: UP007
    task: Literal["classification", "regression"] = "classification"
    delay: Union[str, Int64] = "0"  # noqa: UP007
    reeval_k: Union[Count1, None] = None  # noqa: UP007
    bins: Union[Count0, None] = None  # noqa: UP007
    window: Union[Count1, None] = None  # noqa: UP007
    fading: Union[Fading, None] = None  # noqa: UP007
    weights: str = ""
    detectors: list[Name] = []
    drift_reset: bool = False
    positive: Union[str, None] = None  # noqa: UP007
    auc_window: Count1 = 1
    pending_cap: Union[Count1, None] = None  # noqa: UP007
    snapshot_every: Union[Count0, None] = None  # noqa: UP007
    max_lag: Count0 = 0
    seed: Int64 = 0
    drift_points: list[Count0] = []
    limit: Union[Count0, None] = None  # noqa: UP007
    features: Union[list[Name], None] = None  # noqa: UP007
    protocol: Literal["papers", "moa"] = "papers"
    classes: Union[list[str], None] = None  # noqa: UP007
    stop_at_labels: Union[Count1, None] = None  # noqa: UP007


#: The form's array properties: msgspec takes a tuple for a list, the schema only a list.
_ARRAYS = ("learners", "detectors", "drift_points", "features", "classes")


def in_common_form(message: Any) -> bool:
    """Whether ``message`` (a JSON-decoded definition, or a dict of the same types) is in
    the common form above: then ``experiments.json`` accepts it.

    >>> in_common_form({"stream": "s", "learners": ("nb",)})  # an array is a list
    False
    """
    if type(message) is not dict:
        return False
    for key in _ARRAYS:
        value = message.get(key)
        if value is not None and type(value) is not list:
            return False
    try:
        form = msgspec.convert(message, ExperimentForm)
    except msgspec.ValidationError:
        return False
    return len(set(form.learners)) == len(form.learners)  # the schema's uniqueItems
