"""Every shell command of README.md runs as written.

The commands are extracted from the README's ```sh blocks (continuation lines joined,
comments dropped) and run in README order, each with ``bash`` in one temporary working
directory laid out like a fresh clone: ``.venv`` and ``docs`` link to this checkout's, and
``../shared/datasets`` to the real data (``$STREAMEVAL_DATA_DIR``). ``. .venv/bin/activate``,
``export`` and ``cd`` lines carry over to the commands after them, as in a shell session.
Each command must exit 0 and print what the README says it prints (the tour's first table
line for line, a report path, a results file, ...).

The test is marked ``slow``: ``make slow`` runs it. What it does not run there, and why
(measured on this machine: 2 cores shared with other work, load average 2-4):

* ``make test`` is what CI runs (``.ci/run``); running it from the suite would recurse.
* Slow whole-dataset commands run in ``make readme-check`` (``STREAMEVAL_README_SLOW=1``:
  every command; ``.ci/run`` calls it after ``make slow`` with ``STREAMEVAL_README_SLOW=only``,
  the slow ones alone, as ``make slow`` ran the others): ``make run`` (~2-3 min), the tour's
  ``evaluate --delay natural ... --reeval-k 10`` (45 s), ``run --dataset electricity ...``
  (100 s), ``evaluate ... --snapshot-every 1000 --report`` (95 s), then ``report`` on its
  JSON (6 s), and the ``import[...]`` evaluate (20-45 s). Measured together with
  ``STREAMEVAL_README_SLOW=1``: 9 min for the whole file at load average 4-5 (``make run``
  228 s, ``run`` 109 s, the two natural-delay evaluates 55 s and 27 s, the dashboard 60 s);
  inside ``make slow`` the fast commands take ~1 minute.
* ``make bench`` is only named in the README's prose (its table's provenance), not in an
  ```sh block: at ~9 minutes it would take a third of CI's 30-minute budget, and
  ``tests/test_bench.py`` runs the same harness with ``--quick``. It is not run by CI.
* The live-dashboard ``run --dashboard 6066`` replays at 20000 times event time (an hour
  for the whole stream; the five-minute tour's, 2,000 instances at 100000 times, takes
  36 s of replay): the test starts each as written, waits until
  ``http://127.0.0.1:6066/dashboard`` serves the page and ``/api/metrics`` answers, then
  interrupts it (skipped when port 6066 is taken). Waiting for the first snapshots (every 453
  labels by default: ~45 s more at that speed) is left to ``tests/test_dashboard.py``, which
  watches the curves update in Chromium.
* A block marked ``<!-- readme-test: ... -->`` is a template for the user's own Kafka
  cluster (``broker1:9093``, ``KAFKA_SASL_PASSWORD=...``): its ``export`` line is checked
  through ``streameval config show worker`` (the values arrive, the password is masked);
  its ``worker``/``submit``/``replay`` lines are reported as skipped with that reason.
* ``make kafka-up`` / ``kafka-experiment`` / ``kafka-down`` (README prose and
  docker/README.md) need a Docker engine, which CI lacks: the compose file they use is
  validated with ``docker compose config`` or ``docker-compose config`` where a client
  exists, else skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: "1": every command, the slow ones too; "only": only the slow ones (CI, after `make slow`)
SLOW_MODE = os.environ.get("STREAMEVAL_README_SLOW", "")
SLOW = SLOW_MODE in ("1", "only")
ONLY_SLOW = SLOW_MODE == "only"
ONLY_SLOW_REASON = "fast: `make slow` ran it (STREAMEVAL_README_SLOW=only runs the slow ones)"
MARK = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
SLOW_REASON = "slow: run by `make readme-check` in .ci/run (STREAMEVAL_README_SLOW=1)"


@dataclass(frozen=True)
class Command:
    text: str  # as written, continuation lines joined
    block: int
    skip: str | None = None  # the block's readme-test marker
    output: str | None = None  # the ``` block right after this block, if any

    @property
    def bare(self) -> str:
        """Without the trailing comment and repeated blanks."""
        return " ".join(re.sub(r"\s+#.*$", "", self.text).split())

    @property
    def is_state(self) -> bool:
        return self.bare.split(" ", 1)[0] in (".", "source", "export", "cd")


def readme_commands(text: str | None = None) -> list[Command]:
    """Every command of the ```sh blocks of ``text`` (the README), in order."""
    lines = (README.read_text() if text is None else text).splitlines()
    commands: list[Command] = []
    i, block = 0, 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = MARK.search(lines[j]) if j >= 0 else None
        body: list[str] = []
        i += 1
        while lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        output = None
        k = i + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].strip() == "```":
            end = lines.index("```", k + 1)
            output = "\n".join(lines[k + 1 : end])
        block += 1
        pending = ""
        for raw in body:
            line = raw.rstrip()
            if pending:
                line = pending + " " + line.strip()
                pending = ""
            if line.endswith("\\"):
                pending = line[:-1].rstrip()
                continue
            if not line.strip() or line.strip().startswith("#"):
                continue
            commands.append(Command(line.strip(), block, mark.group(1) if mark else None, output))
        i += 1
    return commands


def test_extraction_joins_continuations_and_drops_comments() -> None:
    text = (
        "intro\n```sh\n# a comment\nexport A=1   # trailing\nstreameval evaluate --x 1 \\\n"
        "    --y 2   # two lines\n\n```\n\n```\nout\n```\n"
        "<!-- readme-test: needs a cluster -->\n```sh\nstreameval worker &\n```\n"
        "```python\nprint(1)\n```\n"
    )
    got = readme_commands(text)
    assert [c.bare for c in got] == [
        "export A=1",
        "streameval evaluate --x 1 --y 2",
        "streameval worker &",
    ]
    assert got[0].is_state and not got[1].is_state
    assert got[1].output == "out" and got[2].skip == "needs a cluster"


COMMANDS = readme_commands()
STATE = [c for c in COMMANDS if c.is_state and c.skip is None]


def expect(command: Command) -> tuple[list[str], bool]:
    """What ``command`` must print, and whether it is slow (run by `make readme-check`)."""
    bare = command.bare
    if bare == "make run":
        return ["results written to results/electricity-run.json", "driver run"], True
    if bare.startswith("streameval evaluate --dataset electricity --learner nochange"):
        # the README prints the table this command prints: every line of it
        assert command.output, "the README shows this command's output"
        return [line for line in command.output.splitlines() if line.strip()], False
    if bare.startswith("streameval evaluate --dataset electricity --limit 2000 --learner"):
        return ["electricity: 2,000 instances, 2,000 labelled, delay 0", "vs NoChange"], False
    if "--report results/elec-2k-report" in bare:
        return [
            "shown: b=0, 10, 18, 21",  # the binned table says which bins and why
            "results written to results/elec-2k.json",
            "report written to results/elec-2k-report/report.html",
        ], False
    if bare.startswith("streameval diagnose --dataset electricity"):
        return ["electricity:", "quick test on first 100: temporal dependence"], False
    if "--report results/elec-report" in bare:
        return ["report written to results/elec-report/report.html"], True
    if bare.startswith("streameval evaluate --dataset electricity --delay natural"):
        return ["results written to results/elec.json", "results/elec.binned.png"], True
    if bare.startswith("streameval evaluate --dataset 'sea_drift"):
        return ["drift alarms:", "nb / adwin:", "nb / ratio_fading:"], False
    if bare.startswith("streameval run --dataset electricity --delay natural --learner nochange"):
        return ["driver run", "results written to results/elec-run.json"], True
    if bare.startswith("streameval report results/elec.json"):
        return ["report written to results/elec-report/report.html"], True
    if "--allow-import" in bare:
        return ["import[path=river.tree.ExtremelyFastDecisionTreeClassifier]"], True
    if bare.startswith("streameval evaluate --dataset 'csv:docs/examples/orders.csv"):
        return ["3,000 instances, 3,000 labelled, delay natural", "estimators whole"], False
    if bare.startswith("streameval config show"):
        return ["# config file: docs/streameval.example.toml (flag --config)"], False
    if bare.startswith("streameval evaluate --config docs/streameval.example.toml"):
        return ["results written to results/elec-config.json", "window(500)"], False
    raise AssertionError(f"the test does not know what this README command prints: {bare}")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A working directory laid out like a fresh clone beside ``../shared/datasets``."""
    top = tmp_path_factory.mktemp("readme")
    work = top / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "docs").symlink_to(ROOT / "docs")
    (top / "shared").mkdir()
    (top / "shared" / "datasets").symlink_to(data_dir.resolve())
    return work


def shell_env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KAFKA_", "STREAMEVAL_")) and k != "VIRTUAL_ENV"
    }
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["STREAMEVAL_DATA_DIR"] = str(data_dir.resolve())
    env["COLUMNS"] = "200"
    return env


def script(command: Command) -> str:
    """The session so far (activate, exports) and the command, as written."""
    before = [c.text for c in STATE if COMMANDS.index(c) < COMMANDS.index(command)]
    return "set -e\n" + "\n".join([*before, command.text]) + "\n"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except OSError:
        return 0, b""


def run_dashboard(command: Command, cwd: Path, env: dict[str, str]) -> None:
    port = int(re.search(r"--dashboard (\d+)", command.bare).group(1))
    if not port_free(port):
        pytest.skip(f"port {port} is taken on this machine")
    log = cwd / "dashboard-run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", script(command)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        page = api = None
        while time.monotonic() < deadline and proc.poll() is None:
            status, body = get(f"http://127.0.0.1:{port}/dashboard")
            if status == 200:
                page = body
                status, body = get(f"http://127.0.0.1:{port}/api/metrics")
                if status == 200:
                    api = json.loads(body)
                    break
            time.sleep(1)
        assert proc.poll() is None, log.read_text()[-3000:]
        assert page is not None and b"<html" in page.lower(), log.read_text()[-3000:]
        # the curves themselves, updating, are tests/test_dashboard.py's (in Chromium)
        assert api is not None and "streams" in api and "health" in api, api
        assert f"dashboard: http://127.0.0.1:{port}/dashboard" in log.read_text()
    finally:
        if proc.poll() is None:
            # SIGTERM, not SIGINT: a background job (CI) starts with SIGINT ignored
            os.killpg(proc.pid, signal.SIGTERM)  # run stops its worker and broker
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def check_cluster_template(command: Command, cwd: Path, env: dict[str, str]) -> None:
    """The template's settings reach the worker, its password masked (no cluster is here)."""
    done = subprocess.run(
        ["bash", "-c", f"set -e\n{command.text}\nstreameval config show worker\n"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assigned = dict(re.findall(r"(KAFKA_\w+)=(\S+)", command.bare))
    out = done.stdout
    assert f'bootstrap = "{assigned["KAFKA_BOOTSTRAP_SERVERS"]}"' in out
    for key in ("security_protocol", "sasl_mechanism", "sasl_username"):
        value = assigned[f"KAFKA_{key.upper()}"]
        assert re.search(rf'^{key} = "{re.escape(value)}"\s+# env KAFKA_{key.upper()}$', out, re.M)
    assert re.search(r'^sasl_password = "\*\*\*"\s+# env KAFKA_SASL_PASSWORD$', out, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.block}:{c.bare[:60]}" for c in COMMANDS])
def test_readme_command(command: Command, clone: Path, data_dir: Path) -> None:
    env = shell_env(data_dir)
    bare = command.bare
    if command.skip is not None:
        if bare.startswith("export KAFKA_") and "KAFKA_SECURITY_PROTOCOL" in bare:
            check_cluster_template(command, clone, env)
            return
        pytest.skip(f"{command.skip}: {bare}")
    if bare == "make test":
        pytest.skip("`make test` is what CI runs (.ci/run); running it here would recurse")
    if command.is_state:
        done = subprocess.run(["bash", "-c", script(command)], cwd=clone, env=env, timeout=60)
        assert done.returncode == 0
        return
    if "--dashboard" in bare:
        if ONLY_SLOW:
            pytest.skip(ONLY_SLOW_REASON)
        run_dashboard(command, clone, env)
        return
    wanted, slow = expect(command)
    if slow and not SLOW:
        pytest.skip(SLOW_REASON)
    if ONLY_SLOW and not slow:
        pytest.skip(ONLY_SLOW_REASON)
    cwd = ROOT if bare.startswith("make ") else clone
    done = subprocess.run(
        ["bash", "-c", script(command)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    both = done.stdout + done.stderr
    assert done.returncode == 0, f"{bare}\n--- output ---\n{both[-4000:]}"
    for piece in wanted:
        assert piece in both, f"{bare}: {piece!r} not in output:\n{both[-4000:]}"


def compose_client() -> list[str] | None:
    if shutil.which("docker"):
        ok = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if ok.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_make_kafka_targets_compose_file_is_valid() -> None:
    """`make kafka-up/kafka-experiment/kafka-down` use a compose file the client accepts."""
    makefile = (ROOT / "Makefile").read_text()
    m = re.search(r"^COMPOSE := \$\(COMPOSE_CMD\) -p (\S+) -f (\S+)", makefile, re.M)
    assert m, "Makefile has no COMPOSE line"
    project, compose = m.group(1), ROOT / m.group(2)
    assert compose.is_file()
    client = compose_client()
    if client is None:
        pytest.skip("no docker compose client on this machine (make kafka-* needs Docker)")
    # the workers' checkpoint key is required (docker/.env, or the environment)
    env = {**os.environ, "STREAMEVAL_CHECKPOINT_KEY": "k" * 64}
    done = subprocess.run(
        [*client, "-p", project, "-f", str(compose), "--profile", "experiment", "config"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    if done.returncode != 0 and "profile" in done.stderr:  # docker-compose v1 before 1.28
        done = subprocess.run(
            [*client, "-f", str(compose), "config"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    for service in ("kafka", "worker", "replay"):
        assert re.search(rf"^  {service}:", done.stdout, re.M), service


def readme_python_examples(text: str | None = None) -> list[tuple[str, str | None]]:
    """Every ```python block of ``text`` (the README) with the ``` output block after it."""
    source = README.read_text() if text is None else text
    block = re.compile(r"```python\n(?P<code>.*?)```\s*(?:```\n(?P<out>.*?)```)?", re.S)
    return [
        (m["code"], m["out"].strip() if m["out"] is not None else None)
        for m in block.finditer(source)
    ]


def test_python_example_extraction() -> None:
    text = "x\n```python\nprint(1)\n```\n\n```\n1\n```\n```python\npass\n```\n"
    assert readme_python_examples(text) == [("print(1)\n", "1"), ("pass\n", None)]


#: The README's Python examples that show their output; the other block, the metrics
#: consumer, loops forever on a broker's topic.
EXAMPLES = [(code, out) for code, out in readme_python_examples() if out is not None]


@pytest.mark.parametrize("code, output", EXAMPLES)
def test_readme_python_example(code: str, output: str, tmp_path: Path) -> None:
    """The README's Python runs as written, with the installed package only (from a
    directory that is not the checkout), and prints what the README shows."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == output
