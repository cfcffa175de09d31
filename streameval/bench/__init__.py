"""``streameval bench``: speed and memory, every figure a ratio measured in the same run.

Every configuration runs in a fresh child process (``python -m streameval.bench
--child``, the job as JSON on stdin), ``--reps`` times (default 3), repetitions
interleaved (rep 1 of every configuration, then rep 2, ...), and reports the
median. Each child reports its own peak RSS (``VmHWM`` of ``/proc/self/status``)
and, for Kafka runs, that of the worker process that did the evaluation.

The references are measured in the same run, on the same machine and, for
Kafka, on the same broker (one embedded Tansu broker for the whole bench, or
the cluster of ``KAFKA_BOOTSTRAP_SERVERS``):

(a) the limit: raw confluent-kafka produce, then consume + ``json.loads`` of
    the very messages a replay sends (one event per message, and 200 per message);
(b) the peer: ``river.evaluate.progressive_val_score`` with river's
    ``GaussianNB`` and ``metrics.Accuracy`` on the same stream and delay;
(c) ``streameval.pipeline.evaluate.evaluate`` for the same configuration.

The targets (``TARGETS``) are checked and printed PASS/FAIL; ``bench/results.json``
holds every repetition, ``bench/results.md`` the table. ``bench/README.md``
explains the choices and holds the profiles of failing targets.

Heavy imports (river, confluent-kafka, the pipeline) stay inside functions so
that ``streameval --help`` does not pay for them.
"""

from streameval.bench.cli import add_bench_arguments, add_bench_command, cmd_bench, main
from streameval.bench.measure import deep_sizeof
from streameval.bench.plans import PLANS, TARGETS, Plan

__all__ = [
    "PLANS",
    "TARGETS",
    "Plan",
    "add_bench_arguments",
    "add_bench_command",
    "cmd_bench",
    "deep_sizeof",
    "main",
]
