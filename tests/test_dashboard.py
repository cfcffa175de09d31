"""The live dashboard: the history the worker keeps, ``/api/metrics``, and the page in Chromium.

The first tests are plain unit tests of :mod:`streameval.agents.dashboard`. Then the page
in headless Chromium (Selenium with Debian's ``chromium`` and ``chromium-driver``): once on
the snapshots of an in-process Electricity run served by a small loopback server, checking
what the page draws (axes, zero lines, curves of many points, settings, verdicts,
progress) from the browser's DOM, and once on the real thing: a broker, a worker with
``--web``, an Electricity replay with default settings paced to last about 15 s, checking
that the curves grow while the stream runs. Without Chromium these are skipped with the
reason (and fail under ``CI=true``, where ``.ci/run`` installs it). Screenshots go to
``$STREAMEVAL_SCREENSHOT_DIR`` (else the test's temporary directory).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from dashboard_story import STORY, check_story, serve_page
from streameval.agents.dashboard import (
    DashboardHistory,
    dashboard_page,
    known_length,
    mean_rate,
    metrics_payload,
    settings_of,
    throughput,
)
from streameval.pipeline.config import ExperimentConfig, auto_snapshot_every
from streameval.pipeline.events import DriftEvent, MetricSnapshot

LEARNERS = ["nochange", "nb", "ta:ht"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def snapshot(n: int, learner: str = "nb", kind: str = "periodic", **metrics: float) -> Any:
    values = {"accuracy": 0.8, "kappa": 0.5, "pending": 48, **metrics}
    return MetricSnapshot("s", learner, n, float(n) * 1800, kind, values, {"accuracy": [0.5, 0.9]})


# -- unit tests -------------------------------------------------------------------------------


def test_history_keeps_series_binned_curve_and_alarms() -> None:
    clock = FakeClock()
    history = DashboardHistory(clock=clock)
    v0 = history.version
    for n in (200, 400, 600):
        history.record([snapshot(n, "nb"), snapshot(n, "nochange", kappa=float("nan"))])
        clock.now += 2.0
    history.record([DriftEvent("s", "nb", "ddm", 333, 5.0, 3.1), "not an output"])
    assert history.version != v0
    stream = history.to_json()["s"]
    assert stream["learners"] == ["nb", "nochange"]
    assert stream["n_labelled"] == 600 and stream["final"] is False
    nb = stream["series"]["nb"]
    assert nb["n_labelled"] == [200, 400, 600]
    assert nb["accuracy"] == [0.8, 0.8, 0.8] and nb["auc"] == [None, None, None]
    assert nb["pending"] == [48, 48, 48]
    assert nb["throughput"] == [None, 100.0, 100.0]  # 200 labels per 2 wall seconds
    assert stream["series"]["nochange"]["kappa"] == [None, None, None]  # NaN -> null
    assert stream["binned"]["nb"] == {"n_labelled": 600, "accuracy": [0.5, 0.9]}
    assert [(a["learner"], a["index"]) for a in stream["drift"]] == [("nb", 333)]
    json.dumps(history.to_json(), allow_nan=False)  # strict JSON


def test_history_is_bounded_and_keeps_n_labelled_increasing() -> None:
    history = DashboardHistory(maxlen=5, clock=FakeClock())
    for n in range(1, 21):
        history.add_snapshot(snapshot(n * 10))
    history.add_snapshot(snapshot(200, kind="final", accuracy=0.9))  # same count: replaces
    for i in range(8):
        history.add_drift(DriftEvent("s", "nb", "ph", i, 0.0, 1.0))
    stream = history.to_json()["s"]
    assert stream["series"]["nb"]["n_labelled"] == [160, 170, 180, 190, 200]
    assert stream["series"]["nb"]["accuracy"][-1] == 0.9
    assert stream["final"] is True
    assert len(stream["drift"]) == 5
    history.add_snapshot(snapshot(175))  # a replayed older snapshot drops what it overlaps
    assert history.to_json()["s"]["series"]["nb"]["n_labelled"] == [160, 170, 175]


def test_history_lists_the_experiments_settings_and_expected_length() -> None:
    history = DashboardHistory(clock=FakeClock())
    config = ExperimentConfig(
        "s", ["nb"], dataset="electricity", delay="48", limit=4000, window=500, reeval_k=10
    )
    history.define(config)
    stream = history.to_json()["s"]
    assert stream["learners"] == [] and stream["series"] == {}  # defined, nothing scored yet
    settings = stream["settings"]
    assert settings["expected"] == 4000 and settings["window"] == 500
    assert settings["delay"] == "48" and settings["reeval_k"] == 10 and settings["fading"] is None
    history.add_snapshot(snapshot(200))
    assert history.to_json()["s"]["settings"] == settings  # kept beside the curves
    # the length comes from the limit, the registry of real datasets or a synthetic n
    assert known_length(ExperimentConfig("s", ["nb"], dataset="electricity")) == 45_312
    assert known_length(ExperimentConfig("s", ["nb"], dataset="covtype", limit=10**9)) == 581_012
    assert known_length(ExperimentConfig("s", ["nb"], dataset="sea_drift[n=20000]")) == 20_000
    assert known_length(ExperimentConfig("s", ["nb"], dataset="csv:orders.csv")) is None
    assert known_length(ExperimentConfig("s", ["nb"])) is None
    assert settings_of(ExperimentConfig("s", ["nb"], limit=7))["expected"] == 7


def test_mean_rate_is_labels_over_wall_seconds_of_the_kept_points() -> None:
    assert mean_rate([]) is None and mean_rate([(10, 5.0)]) is None
    assert mean_rate([(10, 5.0), (20, 5.0)]) is None  # one instant: no rate
    assert mean_rate([(0, 0.0), (50, 1.0), (450, 4.0)]) == 112.5
    clock = FakeClock()
    history = DashboardHistory(clock=clock)
    for n in (100, 200, 300):
        history.add_snapshot(snapshot(n))
        clock.now += 0.5
    assert history.to_json()["s"]["rate"] == 200.0  # 200 labels in 1 wall second


def test_throughput_uses_a_wall_window() -> None:
    assert throughput([], []) == []
    assert throughput([10], [0.0]) == [None]
    assert throughput([10, 20], [0.0, 0.0]) == [None, None]  # same instant: no rate
    rates = throughput([0, 100, 200, 300, 400, 500], [0, 1, 2, 3, 4, 10], window=2.0)
    assert rates == [None, 100.0, 100.0, 100.0, 100.0, 16.7]


def test_payload_unchanged_since_and_worker_status() -> None:
    history = DashboardHistory(clock=FakeClock())
    history.add_snapshot(snapshot(200))
    status = {"healthy": False, "streams": {"s": {"n_labelled": 200}}, "counts": {"events": 3}}
    full = metrics_payload(history, status)
    assert full["worker"]["healthy"] is False and "s" in full["streams"]
    same = metrics_payload(history, status, since=full["version"])
    health = {"healthy": False, "reason": "outputs not delivered"}  # in every answer
    assert full["health"] == health
    assert same == {
        "version": full["version"],
        "unchanged": True,
        "generated": 1000.0,
        "health": health,
    }
    history.add_snapshot(snapshot(400))
    assert "streams" in metrics_payload(history, status, since=full["version"])
    assert metrics_payload(history, stream="nope")["streams"] == {}
    other = DashboardHistory(clock=FakeClock())  # another worker process: another version
    assert other.version != DashboardHistory(clock=FakeClock()).version


def test_page_is_self_contained_and_its_csp_allows_only_its_own_script() -> None:
    html, csp = dashboard_page()
    assert "/api/metrics" in html and "<svg" not in html  # charts are drawn by the script
    for external in ("http://", "https://", "src=", "@import"):
        assert external not in html.replace("http://www.w3.org/2000/svg", "")
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert "script-src 'sha256-" in csp and "unsafe" not in csp
    assert "innerHTML" not in html  # stream and learner names only ever go into textContent


class FakeView:
    """What a Faust view offers a handler: ``html`` and ``json`` responses."""

    def html(self, value: str, **kw: Any) -> dict[str, Any]:
        return {"body": value, "status": 200, **kw}

    def json(self, value: Any, **kw: Any) -> dict[str, Any]:
        return {"body": value, "status": 200, **kw}


class FakeApp:
    def __init__(self) -> None:
        self.pages: dict[str, Any] = {}

    def page(self, path: str) -> Any:
        def add(handler: Any) -> Any:
            self.pages[path] = handler
            return handler

        return add


class FakeWorker:
    def __init__(self) -> None:
        self.history = DashboardHistory(clock=FakeClock())
        self.healthy = True

    def status(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "streams": {}, "counts": {}}


def test_views_answer_dashboard_metrics_and_health() -> None:
    import asyncio
    from types import SimpleNamespace

    from streameval.agents.dashboard import register_views

    app, worker = FakeApp(), FakeWorker()
    register_views(app, worker)
    assert set(app.pages) == {"/dashboard", "/api/metrics", "/health"}

    def get(path: str, **query: str) -> dict[str, Any]:
        request = SimpleNamespace(query=query)
        return asyncio.run(app.pages[path](FakeView(), request))

    page = get("/dashboard")
    assert page["headers"]["Content-Security-Policy"] == dashboard_page()[1]
    worker.history.add_snapshot(snapshot(200))
    body = get("/api/metrics")["body"]
    assert body["streams"]["s"]["n_labelled"] == 200
    assert get("/api/metrics", since=body["version"])["body"]["unchanged"] is True
    assert get("/health")["status"] == 200
    worker.healthy = False
    health = get("/health")
    assert health["status"] == 503 and health["body"]["status"] == "failing"


def test_views_report_a_lost_broker_with_reason_and_since() -> None:
    import asyncio
    from types import SimpleNamespace

    from streameval.agents.dashboard import register_views
    from streameval.agents.health import BrokerHealth

    clock, ticks = FakeClock(), [50.0]
    broker = BrokerHealth("k1:9092", 120.0, clock=clock, monotonic=lambda: ticks[0])
    app, worker = FakeApp(), FakeWorker()
    register_views(app, worker, broker)

    def get(path: str, **query: str) -> dict[str, Any]:
        return asyncio.run(app.pages[path](FakeView(), SimpleNamespace(query=query)))

    ok = get("/health")
    assert ok["status"] == 200 and ok["body"]["broker"]["state"] == "reachable"
    version = get("/api/metrics")["body"]["version"]
    clock.now, ticks[0] = 1010.0, 60.0
    broker.lost("Local: Timed out")
    clock.now, ticks[0] = 1015.0, 65.0
    broker.lost("Local: Timed out")
    down = get("/health")
    assert down["status"] == 503 and down["body"]["healthy"] is False
    assert down["body"]["reason"] == "Kafka broker at k1:9092 unreachable for 5 s: Local: Timed out"
    assert down["body"]["broker"] == {
        "state": "unreachable",
        "address": "k1:9092",
        "since": 1010.0,
        "timeout": 120.0,
        "outages": 1,
        "reason": "Local: Timed out",
        "attempts": 2,
        "down_seconds": 5.0,
    }
    # the page polls with ?since: nothing new was recorded, the health still comes along
    same = get("/api/metrics", since=version)["body"]
    assert same["unchanged"] is True and same["health"]["broker"]["since"] == 1010.0
    clock.now, ticks[0] = 1020.0, 70.0
    broker.restored()
    back = get("/health")["body"]
    assert back["healthy"] is True and back["broker"]["since"] == 1020.0
    assert get("/api/metrics")["body"]["worker"]["healthy"] is True


# -- the page in Chromium, on a live run ------------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1300",
)


def _missing_browser(reason: str) -> None:
    message = (
        f"{reason}; install Debian's chromium and chromium-driver and selenium "
        "(pip install -e '.[dev]'), or set STREAMEVAL_CHROMIUM / STREAMEVAL_CHROMEDRIVER"
    )
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def _which(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return shutil.which(os.environ[env])  # None unless it is an executable
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A headless Chromium driven by Selenium (skipped, with the reason, when absent)."""
    chromium = _which("STREAMEVAL_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    driver_path = _which("STREAMEVAL_CHROMEDRIVER", "chromedriver")
    if chromium is None:
        _missing_browser("no Chromium binary found (looked for chromium, chromium-browser)")
    if driver_path is None:
        _missing_browser("no chromedriver found")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing_browser("selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(driver_path)))
    try:
        yield driver
    finally:
        driver.quit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(url: str, method: str = "GET", timeout: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def answers(url: str) -> bool:
    try:
        return http(url, timeout=1.0)[0] == 200
    except OSError:  # not listening yet (URLError is an OSError)
        return False


def wait_for(predicate: Any, timeout: float, what: str, alive: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if alive is not None and not alive():
            raise AssertionError(f"the worker stopped while waiting for {what}")
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def png_checks(png: bytes, path: Path) -> None:
    """A real picture: PNG, a sensible size, and far from one flat colour."""
    import numpy as np
    from PIL import Image

    path.write_bytes(png)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    assert width >= 800 and height >= 600, image.size
    pixels = np.asarray(image, dtype=np.int16).reshape(-1, 3)
    colours = np.unique(pixels[:: max(1, len(pixels) // 200_000)], axis=0)
    assert len(colours) > 20, f"{len(colours)} colours: a blank page?"
    background = (pixels == pixels[0]).all(axis=1).mean()
    assert background < 0.97, f"{background:.1%} of the pixels are the background colour"


@pytest.mark.slow
def test_page_tells_the_story_of_a_finished_stream_in_chromium(
    browser: Any, data_dir: Path, tmp_path: Path
) -> None:
    """Electricity with default settings (snapshots every 1 % of the 3000 instances), run
    in-process; its snapshots reach the page as a worker would publish them, a few
    milliseconds of wall time apart. AUC's values sit within 0.01 of each other, pending
    is 0 and every kappa_per is negative: the cases that gave duplicate tick labels, a
    pending axis of -0.05..0.05, no zero line and single dots."""
    from streameval.pipeline.evaluate import evaluate_config, prepare

    clock = FakeClock()
    history = DashboardHistory(clock=clock)
    config = ExperimentConfig(
        "elec-story", LEARNERS, dataset="electricity", limit=3000, reeval_k=10, bins=20,
        window=500, detectors=["ddm"],
    )  # fmt: skip
    prepared = prepare(config, data_dir)[1]
    assert prepared.snapshot_every == auto_snapshot_every(3000) == 30
    history.define(prepared)

    def record(out: Any) -> None:
        clock.now += 0.001
        history.record([out])

    results = evaluate_config(config, data_dir=data_dir, on_output=record)
    stream = history.to_json()["elec-story"]
    assert stream["final"] and stream["n_labelled"] == results["n_labelled"] == 3000
    assert len(stream["series"]["nb"]["n_labelled"]) == 100  # every 30 labels
    assert set(stream["series"]["nb"]["pending"]) == {0}
    browser.get_log("browser")  # drop what earlier pages left (their servers are gone)
    with serve_page(history) as base:
        browser.get(base + "/dashboard")
        page = wait_for(
            lambda: (r := browser.execute_script(STORY)) and r["n"] == 3000 and r,
            30,
            "the page to draw the stream",
        )
        shots = Path(os.environ.get("STREAMEVAL_SCREENSHOT_DIR") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        png_checks(browser.get_screenshot_as_png(), shots / "dashboard-story.png")
        # read while the server still answers: a poll in flight when it stops is reset
        severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not severe, severe  # no script error, nothing blocked by the CSP
    check_story(page, stream, finished=True)
    assert [r[0] for r in page["rows"][1:]] == LEARNERS
    assert "no data yet" not in page["charts"]["throughput"]["text"]


CHART_POINTS = (
    "const s = document.querySelector('section.stream');"
    "if (!s) return null;"
    "const paths = [...s.querySelectorAll('svg[data-chart=accuracy] path.line')];"
    "return {n: Number(s.dataset.nLabelled),"
    " points: paths.map(p => Number(p.dataset.points)),"
    " learners: paths.map(p => p.dataset.learner),"
    " markers: s.querySelectorAll('svg[data-chart=accuracy] .alarm-marker').length,"
    " binned: s.querySelectorAll('svg[data-chart=binned] path.line').length,"
    " health: document.getElementById('health').textContent};"
)


@pytest.mark.kafka
@pytest.mark.slow
def test_dashboard_updates_live_in_chromium(
    browser: Any, kafka_settings: Any, kafka_prefix: str, data_dir: Path, tmp_path: Path
) -> None:
    from streameval.agents.replay import PackedMessages, replay
    from streameval.agents.run import ResultsWaiter, start_worker, stop_worker, submit_experiment
    from streameval.agents.topics import ensure_topics
    from streameval.pipeline.config import ExperimentConfig
    from streameval.pipeline.evaluate import prepare, schedule

    started = time.monotonic()
    settings = replace(kafka_settings, topic_prefix=kafka_prefix)
    ensure_topics(settings.confluent_config(), settings.partitions, prefix=settings.topic_prefix)
    dataset, config = prepare(
        ExperimentConfig(
            stream=f"elec-dash-{uuid.uuid4().hex[:6]}",
            learners=LEARNERS,
            dataset="electricity",
            limit=4000,
            delay="48",
            reeval_k=10,
            bins=20,
            window=500,
            detectors=["ddm"],
        ),  # no snapshot_every: the default, every 1 % of the 4000 instances
        data_dir,
    )
    assert config.snapshot_every == 40
    events = list(schedule(config, dataset))
    span = events[-1].ts - events[0].ts
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    shots = Path(os.environ.get("STREAMEVAL_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)

    waiter = ResultsWaiter(settings, config.stream)
    submit_experiment(settings, config)
    worker = start_worker(
        settings,
        {"STREAMEVAL_CHECKPOINT_KEY": "dashboard-test-key-" + "k" * 20},
        log_path=tmp_path / "worker.log",
        extra_args=["--web", "--web-port", str(port)],
    )
    alive = lambda: worker.poll() is None  # noqa: E731
    replay_errors: list[BaseException] = []

    def paced_replay() -> None:
        try:  # ~15 s of wall time for the whole stream
            replay(events, settings, speed=span / 15.0, message_format=PackedMessages(50))
        except BaseException as exc:  # reported by the test thread
            replay_errors.append(exc)

    feeder = threading.Thread(target=paced_replay, daemon=True)
    try:
        wait_for(lambda: answers(base + "/health"), 60, "/health", alive)
        feeder.start()
        browser.get_log("browser")  # drop what earlier pages left (their servers are gone)
        browser.get(base + "/dashboard")
        assert "streameval" in browser.title

        first = wait_for(
            lambda: (
                (r := browser.execute_script(CHART_POINTS)) and min(r["points"] or [0]) > 0 and r
            ),
            30,
            "the first curves on the page",
            alive,
        )
        assert sorted(first["learners"]) == sorted(LEARNERS)
        second = wait_for(
            lambda: (
                (r := browser.execute_script(CHART_POINTS))
                and r["n"] > first["n"]
                and all(a > b for a, b in zip(r["points"], first["points"], strict=True))
                and r
            ),
            30,
            "the curves to grow",
            alive,
        )
        assert feeder.is_alive(), "the replay ended before the second read: pace it slower"
        assert second["binned"] == len(LEARNERS)
        assert second["health"] == "worker healthy"
        running = wait_for(
            lambda: (
                (r := browser.execute_script(STORY))
                and r["eta"]
                and min(r["charts"]["throughput"]["points"] or [0]) > 1
                and r
            ),
            30,
            "an ETA and a throughput curve",
            alive,
        )
        png_checks(browser.get_screenshot_as_png(), shots / "dashboard-live.png")

        status, body = http(base + "/api/metrics")
        assert status == 200
        api = json.loads(body)
        stream = api["streams"][config.stream]
        assert sorted(stream["learners"]) == sorted(LEARNERS)
        for learner in LEARNERS:
            series = stream["series"][learner]
            n = series["n_labelled"]
            assert len(n) >= 2 and all(a < b for a, b in itertools.pairwise(n)), n
            assert all(v % 40 == 0 for v in n)
            for key in ("accuracy", "kappa", "kappa_per", "kappa_plus", "auc", "pending"):
                assert len(series[key]) == len(n) and series[key][-1] is not None, key
            assert 0.0 <= series["accuracy"][-1] <= 1.0
            assert any(v is not None and v > 0 for v in series["throughput"])
            assert len(stream["binned"][learner]["accuracy"]) == 22  # B + 2 bins
        assert api["worker"]["healthy"] is True
        assert stream["settings"]["expected"] == 4000 and stream["settings"]["delay"] == "48"
        if not stream["final"]:
            check_story(running, stream, finished=False)

        assert http(base + "/api/metrics", method="POST")[0] == 405  # read-only
        assert http(base + "/dashboard", method="DELETE")[0] == 405

        feeder.join(60)
        assert not replay_errors, replay_errors
        results = waiter.wait(300, alive=alive)  # generous: a loaded machine
        assert results["n_labelled"] == 4000
        final = wait_for(
            lambda: (r := browser.execute_script(CHART_POINTS)) and r["n"] == 4000 and r,
            30,
            "the final snapshot on the page",
        )
        assert final["markers"] > 0  # ddm alarms drawn on the accuracy chart
        story = browser.execute_script(STORY)
        check_story(
            story, json.loads(http(base + "/api/metrics")[1])["streams"][config.stream], True
        )
        png_checks(browser.get_screenshot_as_png(), shots / "dashboard-final.png")
        severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert not severe, severe  # no script error, nothing blocked by the CSP
        health = json.loads(http(base + "/health")[1])
        assert health["status"] == "ok" and health["streams"][config.stream]["finished"]
    except BaseException:
        print((tmp_path / "worker.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        stop_worker(worker)
        feeder.join(5)
    assert time.monotonic() - started < 400  # 15 s of replay; the rest is a loaded machine
