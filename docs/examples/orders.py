"""A small shop's orders and chargebacks: the example stream of the README.

Orders arrive every few minutes (``created``); a chargeback decision (``yes``/``no``)
comes 2 to 72 hours later (``decided_at``). Chargebacks come in waves (a hidden state
that changes rarely), so the labels are temporally dependent, and are likelier for large
orders from some countries and channels. ``python docs/examples/orders.py`` writes
``docs/examples/orders.csv`` (the rows the README evaluates); the Kafka test writes the
same rows to topics of their own layout (``tests/test_source_topics.py``).
"""

from __future__ import annotations

import csv
import math
import random
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

COUNTRIES = ["NZ", "AU", "DE", "BR", "US"]
CHANNELS = ["web", "app", "phone"]
START = datetime(2024, 3, 1, tzinfo=timezone.utc)
COLUMNS = [
    "order_id", "created", "order.customer", "order.amount", "order.country",
    "order.items", "channel", "chargeback", "decided_at",
]  # fmt: skip


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def orders(n: int = 3000, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``n`` orders in time order, each with its chargeback decision and when it came."""
    rng = random.Random(seed)
    now, wave = START, False
    decided: set[datetime] = set()
    for i in range(n):
        now += timedelta(seconds=60 + int(rng.expovariate(1 / 360)))
        wave = (rng.random() < 0.97) == wave  # the wave flips with probability 0.03
        amount = round(math.exp(rng.gauss(3.5, 1.0)), 2)
        country, channel = rng.choice(COUNTRIES), rng.choice(CHANNELS)
        risk = 0.05 + 0.5 * wave + 0.2 * (amount > 80) + 0.15 * (country in ("BR", "US"))
        risk += 0.1 * (channel == "phone")
        at = now + timedelta(seconds=rng.randint(2 * 3600, 72 * 3600))
        while at in decided:  # one decision per second: an order of labels without ties
            at += timedelta(seconds=1)
        decided.add(at)
        yield {
            "order_id": f"o{i:05d}",
            "created": now,
            "order.customer": f"c{rng.randrange(40):02d}",
            "order.amount": amount,
            "order.country": country,
            "order.items": rng.randint(1, 5),
            "channel": channel,
            "chargeback": "yes" if rng.random() < min(risk, 0.95) else "no",
            "decided_at": at,
        }


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([iso(v) if isinstance(v, datetime) else v for v in row.values()])


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("orders.csv")
    write_csv(target, list(orders()))
    print(f"wrote {target}")
