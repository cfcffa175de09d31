"""What the dashboard must show, read from the DOM of a real browser, and a loopback
server of the page for a :class:`~streameval.agents.dashboard.DashboardHistory`.

Used by ``tests/test_dashboard.py``: the checks are those that caught the page's old
defects (single dots, duplicate or inexact tick labels, a pending axis below zero, no zero
line on the kappas, no throughput on a finished stream, no settings or verdicts).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from streameval.agents.dashboard import DashboardHistory, dashboard_page, metrics_payload

# What the page draws, read from the DOM: per chart its tick labels (y ticks sit at
# x = 41, x ticks at y = 193 in the 420 x 210 viewBox), the points of each curve, its zero
# lines; the learner table and the section's text, progress and ETA.
STORY = """
const s = document.querySelector('section.stream');
if (!s) return null;
const charts = {};
for (const svg of s.querySelectorAll('svg[data-chart]')) {
  const fig = svg.closest('figure');
  const texts = [...svg.querySelectorAll('text')];
  charts[svg.dataset.chart] = {
    hidden: fig.hidden,
    text: svg.textContent,
    yticks: texts.filter(t => t.getAttribute('x') === '41').map(t => t.textContent),
    xticks: texts.filter(t => t.getAttribute('y') === '193').map(t => t.textContent),
    points: [...svg.querySelectorAll('path.line')].map(p => Number(p.dataset.points)),
    zero: svg.querySelectorAll('line.zero-line').length,
  };
}
const rows = [...s.querySelector('table').rows].map(r => [...r.cells].map(c => c.textContent));
return {n: Number(s.dataset.nLabelled), charts, rows, text: s.innerText,
        progress: s.dataset.progress ?? null, eta: s.dataset.eta ?? null,
        health: document.getElementById('health').textContent};
"""

# kappa_per of -0.0 and 0.0 read "equal"; the rest by sign
VERDICT = {1: "beats", 0: "equal", -1: "FAILS"}


def tick_value(label: str) -> float:
    """The number a tick label shows ("2.5k" is 2500)."""
    scale = {"k": 1e3, "M": 1e6}.get(label[-1:], 1.0)
    return float(label.rstrip("kM")) * scale


def evenly_spaced(labels: list[str]) -> bool:
    """Tick labels that read as values an equal step apart: exact, none repeated."""
    values = [tick_value(t) for t in labels]
    steps = [b - a for a, b in itertools.pairwise(values)]
    return all(s > 0 and abs(s - steps[0]) <= 1e-9 * max(1.0, abs(s)) for s in steps)


def check_story(page: dict[str, Any], stream: dict[str, Any], finished: bool) -> None:
    """What the dashboard must show of ``stream`` (its ``/api/metrics`` part)."""
    charts = page["charts"]
    shown = {k: c for k, c in charts.items() if not c["hidden"]}
    for key, chart in shown.items():
        for axis in ("yticks", "xticks"):
            labels = chart[axis]
            assert labels and len(set(labels)) == len(labels), (key, axis, labels)
            assert evenly_spaced(labels), (key, axis, labels)  # "0.88" for 0.875 is not
        assert chart["points"] and min(chart["points"]) > 1, (key, chart)  # curves, not dots
    for key in ("accuracy", "auc", "window.accuracy", "binned"):  # bounded in [0, 1]
        ticks = [float(t) for t in shown[key]["yticks"]]
        assert ticks[0] == 0.0 and ticks[-1] == 1.0, (key, ticks)
    for key in ("kappa", "kappa_per", "kappa_plus", "window.kappa_per"):  # at most 1
        assert float(shown[key]["yticks"][-1]) == 1.0, (key, shown[key]["yticks"])
        assert shown[key]["zero"] == 1, key  # zero decides "beats No-Change"
    assert min(float(t) for t in shown["pending"]["yticks"]) >= 0
    assert charts["fading.accuracy"]["hidden"]  # no fading factor was asked for
    settings = stream["settings"]
    assert f"delay {settings['delay']}" in page["text"] and "window 500" in page["text"]
    assert f"snapshot_every {settings['snapshot_every']}" in page["text"]
    head, *rows = page["rows"]
    assert "vs No-Change" in head
    column = head.index("vs No-Change")
    for row in rows:
        assert row[column] in VERDICT.values(), row
        k_per = stream["series"][row[0]]["kappa_per"][-1]
        if page["n"] == stream["n_labelled"]:  # the page drew this very snapshot
            assert row[column] == VERDICT[(k_per > 0) - (k_per < 0)], (row, k_per)
    assert page["progress"] is not None
    if finished:
        assert float(page["progress"]) == 1.0 and "finished" in page["text"]
    else:
        assert 0 < float(page["progress"]) < 1 and page["eta"], page


@contextlib.contextmanager
def serve_page(history: DashboardHistory) -> Iterator[str]:
    """The page and ``/api/metrics`` of ``history`` on a loopback port (what the worker's
    views answer, without a worker)."""
    html, csp = dashboard_page()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/dashboard":
                body, kind = html.encode(), "text/html; charset=utf-8"
            elif url.path == "/api/metrics":
                since = urllib.parse.parse_qs(url.query).get("since", [None])[0]
                payload = metrics_payload(history, {"healthy": True}, since=since)
                body, kind = json.dumps(payload).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Security-Policy", csp)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(5)
