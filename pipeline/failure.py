"""A learner that raised: which one, on which instance, and why.

A learner is the user's code (an ``import[...]`` spec, a registered class, a
River pipeline): it may raise on an instance it cannot handle (a string feature
for a linear model, a class it never saw). The experiment cannot go on without
it, and the user needs the learner, the instance and the exception, not the
stack of the evaluation loop that called it. :class:`LearnerFailed` carries the
three; the CLI prints it as one line and exits with code 1.

>>> exc = LearnerFailed("lr", 17, "predict", TypeError("VectorDict values must be real numbers"))
>>> str(exc)
"learner 'lr' failed on instance 17 (predict): TypeError: VectorDict values must be real numbers"
"""

from __future__ import annotations


class LearnerFailed(RuntimeError):
    """Learner ``name`` raised ``cause`` on instance ``index`` (0-based arrival order)."""

    def __init__(self, name: str, index: int, step: str, cause: BaseException) -> None:
        self.name = name
        self.index = index
        self.step = step
        self.cause = cause
        text = str(cause)
        what = f"{type(cause).__name__}: {text}" if text else type(cause).__name__
        super().__init__(f"learner {name!r} failed on instance {index} ({step}): {what}")


def describe(exc: BaseException) -> str:
    """One line for ``exc``: a :class:`LearnerFailed` as itself, another as ``Type: message``.

    >>> describe(ValueError("bad row")), describe(LearnerFailed("nb", 3, "learn", KeyError("x")))
    ('ValueError: bad row', "learner 'nb' failed on instance 3 (learn): KeyError: 'x'")
    """
    if isinstance(exc, LearnerFailed):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class StoppedAt(Exception):
    """A learner's call over a block of instances stopped at instance ``done`` (0-based
    in the block): it raised ``cause`` at ``step`` (``"predict"`` or ``"learn"``);
    ``answers`` are its answers of the instances before it, and of that instance when
    it failed to learn it."""

    def __init__(self, done: int, step: str, cause: BaseException, answers: list) -> None:
        super().__init__(f"stopped at instance {done} of the block ({step}): {cause!r}")
        self.done = done
        self.step = step
        self.cause = cause
        self.answers = answers
