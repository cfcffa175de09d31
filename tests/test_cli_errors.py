"""Every bad input of the command line: one line on stderr, the right exit code, no traceback,
no librdkafka log line.

The table runs the real CLI (``python -m streameval ...``) as a subprocess. An unreachable
broker is a loopback port nobody listens on; the broker timeout is 2 s
(``STREAMEVAL_BROKER_TIMEOUT``), so each such case ends within seconds of the start-up.
Exit codes: 2 for a wrong input, 75 for a broker that does not answer, 1 for an experiment
that failed (a learner raised).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from streameval.pipeline.config import ExperimentConfig
from streameval.pipeline.events import EndOfStream, FeatureEvent, LabelEvent
from streameval.pipeline.experiment import Experiment

from streameval.cli.errors import EXIT_BROKER, EXIT_FAILED, EXIT_USAGE, is_librdkafka_line

ROOT = Path(__file__).resolve().parents[1]
ORDERS = "csv:docs/examples/orders.csv[target=chargeback]"
LOGREG = "import[path=river.linear_model.LogisticRegression]"


def closed_port() -> int:
    """A loopback port with no listener (bound a moment ago, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PORT = closed_port()
NOWHERE = f"127.0.0.1:{PORT}"


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    rc: int
    says: str  # a part of the one line, as printed
    env: tuple[tuple[str, str], ...] = ()


CASES = [
    Case(
        "limit-negative",
        ["evaluate", "--dataset", "electricity", "--limit", "-5"],
        EXIT_USAGE,
        "streameval evaluate: error: --limit must be at least 0, got -5",
    ),
    Case(
        "diagnose-limit-negative",
        ["diagnose", "--dataset", "electricity", "--limit", "-1"],
        EXIT_USAGE,
        "streameval diagnose: error: --limit must be at least 0, got -1",
    ),
    Case(
        "bins-without-reeval",
        ["evaluate", "--dataset", "electricity", "--limit", "50", "--bins", "5"],
        EXIT_USAGE,
        "streameval evaluate: error: --bins needs --reeval-k",
    ),
    Case(
        "limit-not-a-number",
        ["evaluate", "--dataset", "electricity", "--limit", "x"],
        EXIT_USAGE,
        "streameval evaluate: error: argument --limit: invalid int value: 'x'",
    ),
    Case(
        "unknown-option",
        ["replay", "--dataset", "electricity", "--json", "out.json"],
        EXIT_USAGE,
        "error: unrecognized arguments: --json out.json",
    ),
    Case(
        "positive-not-a-class",
        ["evaluate", "--dataset", "electricity", "--limit", "500", "--positive", "WRONG"],
        EXIT_USAGE,
        "streameval evaluate: error: positive class 'WRONG' is not one of the classes of "
        "electricity: DOWN, UP",
    ),
    Case(
        "positive-not-a-class-run",
        ["run", "--dataset", "electricity", "--limit", "500", "--positive", "WRONG"],
        EXIT_USAGE,
        "streameval run: error: positive class 'WRONG' is not one of the classes",
    ),
    Case(
        "learner-raises-mid-run",
        ["evaluate", "--dataset", ORDERS, "--allow-import", "--learner", LOGREG],
        EXIT_FAILED,
        f"streameval evaluate: error: learner '{LOGREG}' failed on instance 0 (predict): "
        "TypeError: VectorDict values must be real numbers",
    ),
    Case(
        "learner-not-usable",
        [
            *("evaluate", "--dataset", "electricity", "--limit", "100", "--allow-import"),
            *("--learner", "import[path=river.compose.Pipeline]"),
        ],
        EXIT_USAGE,
        "streameval evaluate: error: import[path=river.compose.Pipeline]: not a usable "
        "learner: IndexError: list index out of range",
    ),
    Case(
        "dataset-missing",
        ["evaluate", "--dataset", "csv:no/such/file.csv"],
        EXIT_USAGE,
        "streameval evaluate: error:",
    ),
    Case(
        "worker-no-broker",
        ["worker", "--bootstrap", NOWHERE],
        EXIT_BROKER,
        f"streameval worker: the Kafka broker at {NOWHERE} has not answered",
    ),
    Case(
        "submit-no-broker",
        ["submit", "--bootstrap", NOWHERE, "--dataset", "electricity", "--learner", "nb"],
        EXIT_BROKER,
        f"streameval submit: error: no Kafka broker answered at {NOWHERE} within",
    ),
    Case(
        "replay-no-broker",
        ["replay", "--bootstrap", NOWHERE, "--dataset", "electricity", "--max"],
        EXIT_BROKER,
        f"streameval replay: error: no Kafka broker answered at {NOWHERE} within",
    ),
    Case(
        "run-no-broker",
        ["run", "--dataset", "electricity", "--limit", "100"],
        EXIT_BROKER,
        f"streameval run: error: no Kafka broker answered at {NOWHERE} within",
        (("KAFKA_BOOTSTRAP_SERVERS", NOWHERE),),
    ),
    Case(
        "broker-port-taken",
        ["broker", "--port", "PORT_TAKEN"],
        EXIT_USAGE,
        "streameval broker: error: cannot listen on 127.0.0.1:",
    ),
]


def cli(argv: list[str], extra_env: dict[str, str] | None = None, timeout: float = 180) -> tuple:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "STREAMEVAL_"))}
    env["STREAMEVAL_BROKER_TIMEOUT"] = "2"
    env["STREAMEVAL_CHECKPOINT_KEY"] = "cli-errors-" + "k" * 32
    env.update(extra_env or {})
    done = subprocess.run(
        [sys.executable, "-m", "streameval", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def outcomes(data_dir: Path) -> dict[str, tuple[int, str, str]]:
    """Every case's (exit code, stdout, stderr), three processes at a time: most of each
    case is the interpreter's start-up or a wait for a broker that never answers."""
    with socket.socket() as taken, ThreadPoolExecutor(3) as pool:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        env = {"STREAMEVAL_DATA_DIR": str(data_dir)}
        futures = {
            case.name: pool.submit(
                cli,
                [port if a == "PORT_TAKEN" else a for a in case.argv],
                {**dict(case.env), **env},
            )
            for case in CASES
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_is_one_line_and_an_exit_code(case: Case, outcomes: dict) -> None:
    rc, out, err = outcomes[case.name]
    lines = err.splitlines()
    assert rc == case.rc, err
    assert len(lines) == 1, err
    assert case.says in lines[0], err
    assert "Traceback" not in err and not any(is_librdkafka_line(x) for x in lines), err
    assert out == ""


def test_verbose_lets_librdkafka_lines_through() -> None:
    """What the table's worker case keeps out: librdkafka's reconnection lines."""
    rc, _, err = cli(["worker", "--bootstrap", NOWHERE, "--verbose"])
    assert rc == EXIT_BROKER
    assert any(is_librdkafka_line(x) for x in err.splitlines()), err
    assert f"streameval worker: the Kafka broker at {NOWHERE} has not answered" in err


def labelled(i: int, y: str) -> list:
    return [
        FeatureEvent("s", str(i), float(i), {"x": float(i)}),
        LabelEvent("s", str(i), float(i), y),
    ]


def test_positive_is_refused_at_the_label_that_shows_it_wrong() -> None:
    """Classes known only from the stream: the end of a stream none of whose labels was the
    positive class; a positive class that first comes third (one-vs-rest AUC) is fine."""
    config = ExperimentConfig("s", ["nochange"], positive="yes")
    experiment = Experiment(config)
    for i, y in enumerate("aab"):
        experiment.run(labelled(i, y))
    with pytest.raises(ValueError, match=r"^positive class 'yes' is not one of the stream's") as e:
        experiment.run([EndOfStream("s", 3.0, 6)])
    assert "none of its 3 labels was it (classes: a, b)" in str(e.value)
    fine = Experiment(ExperimentConfig("s", ["nochange"], positive="c"))
    for i, y in enumerate("aabcab"):
        fine.run(labelled(i, y))
    fine.run([EndOfStream("s", 6.0, 12)])
    assert fine.n_labelled == 6 and fine.ended


def test_no_librdkafka_line_is_mistaken() -> None:
    assert not is_librdkafka_line("streameval worker: the Kafka broker at x:1 has not answered")
    assert is_librdkafka_line("%4|1795619432.980|TERMINATE|rdkafka#producer-1| [thrd:app]: x")
