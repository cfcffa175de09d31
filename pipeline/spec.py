"""The one small grammar used on the command line for learners, streams and detectors.

A *component* is a name with optional parameters in brackets::

    ht
    majority[window=1000]
    ph[delta=0.005,lambda=50]
    markov[p_stay=0.9,n=5000]

Wrappers are prefixes separated by ``:`` (``ta3:ht``, ``tc[alpha=0.01]:nb``);
:func:`split_wrappers` cuts a spec into its components, outermost first.

Parameter values are parsed as int, then float, then ``true``/``false``, else
kept as strings. Quote specs with brackets in a shell (``'ht[grace_period=50]'``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_COMPONENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?:\[(?P<params>[^\[\]]*)\])?$")


#: Largest integer a spec parameter may take. Specs arrive in Kafka messages too, and some
#: parameters size a structure up front (windows, lags): a bound keeps one message from
#: exhausting a worker's memory.
MAX_INT_PARAM = 10_000_000


class SpecError(ValueError):
    """A spec string that does not parse, or names something unknown."""


@dataclass(frozen=True)
class Component:
    """One ``name[k=v,...]`` piece of a spec."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.name}[{inner}]"


def parse_value(text: str) -> Any:
    """``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"true"`` -> True, else the string.

    >>> parse_value("3"), parse_value("1e-3"), parse_value("false"), parse_value("x")
    (3, 0.001, False, 'x')
    """
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return text


def parse_component(text: str) -> Component:
    """Parse ``name[k=v,...]``.

    >>> parse_component("majority[window=1000]")
    Component(name='majority', params={'window': 1000})
    """
    text = text.strip()
    m = _COMPONENT.match(text)
    if not m:
        raise SpecError(f"cannot parse {text!r}: expected name or name[key=value,...]")
    params: dict[str, Any] = {}
    raw = m.group("params")
    if raw:
        for item in raw.split(","):
            if not item.strip():
                continue
            if "=" not in item:
                raise SpecError(f"parameter {item!r} in {text!r} is not key=value")
            key, value = item.split("=", 1)
            if key.strip() in params:
                raise SpecError(f"parameter {key.strip()!r} is given twice in {text!r}")
            params[key.strip()] = parse_value(value.strip())
    return Component(m.group("name"), params)


def split_wrappers(spec: str) -> list[Component]:
    """Cut ``ta3:tc:nb`` into components, outermost wrapper first.

    >>> [str(c) for c in split_wrappers("ta3[fill=predicted]:ht")]
    ['ta3[fill=predicted]', 'ht']
    """
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in spec.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == ":" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    if any(not p.strip() for p in parts):
        raise SpecError(f"empty component in {spec!r}")
    return [parse_component(p) for p in parts]


def take_params(
    component: Component, allowed: dict[str, type | tuple[type, ...]]
) -> dict[str, Any]:
    """Check a component's parameters against ``allowed`` names and types.

    >>> take_params(parse_component("x[w=3]"), {"w": int})
    {'w': 3}
    """
    out: dict[str, Any] = {}
    for key, value in component.params.items():
        if key not in allowed:
            names = ", ".join(sorted(allowed)) or "none"
            raise SpecError(f"{component.name}: unknown parameter {key!r} (allowed: {names})")
        expected = allowed[key]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected):
            raise SpecError(f"{component.name}: parameter {key}={value!r} has the wrong type")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT_PARAM:
            raise SpecError(
                f"{component.name}: parameter {key}={value} exceeds the limit {MAX_INT_PARAM:,}"
            )
        out[key] = value
    return out
