"""What the bench runs: the targets, the plan of each mode, the datasets' sizes.

``PLANS`` sizes every target for ``--quick``, the default run and ``--full``;
``experiment_config`` builds the configuration a child evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NB_METRICS = {"window": 1000, "fading": 0.999}  # "every metric on": whole + window + fading
FOUR_LEARNERS = ["nochange", "majority", "nb", "ht"]
BASELINES = ["nochange", "majority"]

TARGETS = {
    "1": "in-process evaluate, nb with every metric (window + fading) >= River "
    "progressive_val_score with GaussianNB on the same stream (ratio >= 1.0)",
    "2": "run through Kafka >= 0.5 x in-process evaluate, same configuration",
    "3": "run with the two baselines >= 0.25 x raw consume+decode rate of the same broker",
    "4": "re-evaluation K=10, B=50 costs <= 3x the same run without it (covtype, delay 1000)",
    "5": "covtype, delay 1000, K=10, B=50, four learners: peak RSS < 1 GiB; pending-buffer "
    "memory proportional to pending instances; the whole stream in <= 5 minutes wall "
    "(issue 15, target 5; --full)",
    "6": "throughput of 1, 2, 4 concurrent streams on one worker and of two workers on "
    "two partitions (a curve, no threshold)",
    "s1": "issue 15 speed target 1: evaluate with nb and with ht, every default metric, >= "
    "0.9 x River's bare loop (predict_proba_one + learn_one, no metric) over the same model "
    "on the same stream (electricity, covtype 100k)",
    "s2": "issue 15 speed target 2: evaluate with the two baselines, every metric, window "
    "and fading, >= 300,000 labelled instances/s in-process on electricity",
    "s3": "issue 15 target 3: run with the two baselines, evaluating a filled topic, >= 0.25 x "
    "the raw consume+decode of the same messages; run with nb end to end >= 0.8 x in-process "
    "evaluate",
    "moa": "issue 15 target 4: evaluate with moa:NaiveBayes and moa:HoeffdingTree >= 0.8 x "
    "CapyMOA's prequential_evaluation of the same MOA learner on the same stream, same "
    "accuracy to 4 decimals (with River's bare loop and progressive_val_score as peers)",
}


@dataclass(frozen=True)
class Plan:
    """What each mode runs (``--quick``, default, ``--full``)."""

    mode: str
    reps: int
    t1: tuple[tuple[str, int | None, str], ...]  # (dataset, limit, delay) for target 1
    t1_learners: tuple[str, ...]  # learner specs with a river peer
    kafka: tuple[tuple[str, int | None], ...]  # (dataset, limit) for targets 2 and 3
    kafka_learners: tuple[tuple[str, ...], ...]  # learner sets for target 2
    pack1: bool  # also run target 3's run with one event per message
    raw_packs: tuple[int, ...]  # message layouts of the raw limit (a)
    cov_limit: int | None  # targets 4 and 5
    cov_delay: str
    curve_limit: int | None  # target 6, instances of electricity per stream
    curve_streams: tuple[int, ...] = (1, 2, 4)
    timeout: float = 3600.0
    moa_stream: tuple[str, int | None] = ("electricity", None)  # (dataset, limit), target moa
    s1: tuple[tuple[str, int | None], ...] = (("electricity", None), ("covtype", 100_000))

    @property
    def cov_label(self) -> str:
        if self.cov_limit is None:
            return "covtype (whole, 581,012)"
        return f"covtype prefix {self.cov_limit:,} of 581,012"


PLANS = {
    "quick": Plan(
        mode="quick",
        reps=1,
        t1=(("electricity", 2000, "0"), ("electricity", 2000, "natural")),
        t1_learners=("nb",),
        kafka=(("electricity", 2000),),
        kafka_learners=(("nb",),),
        pack1=False,
        raw_packs=(200,),
        cov_limit=800,
        cov_delay="100",
        curve_limit=500,
        curve_streams=(1, 2),
        timeout=300.0,
        moa_stream=("electricity", 2000),
        s1=(("electricity", 2000), ("covtype", 1000)),
    ),
    "default": Plan(
        mode="default",
        reps=3,
        t1=(
            ("electricity", None, "0"),
            ("electricity", None, "natural"),
            # the third stream, with its natural (departure -> arrival) delay and a str
            # feature: a prefix, the whole of it alone would take ~7 of the 15 minutes
            ("airlines", 100_000, "natural"),
        ),
        t1_learners=("nb",),
        kafka=(("electricity", None),),
        kafka_learners=(("nb",),),
        pack1=False,
        raw_packs=(200, 1),
        cov_limit=21_000,  # 20,000 instances past the 1,000-instance delay
        cov_delay="1000",
        curve_limit=10_000,
    ),
    "full": Plan(
        mode="full",
        reps=3,
        t1=tuple(
            (d, None, delay)
            for d in ("electricity", "covtype", "airlines")
            for delay in ("0", "natural")
        ),
        t1_learners=("nb", "ht"),
        kafka=(("electricity", None), ("covtype", None), ("airlines", None)),
        kafka_learners=(("nb",), tuple(FOUR_LEARNERS), ("ta:nb",)),
        pack1=True,
        raw_packs=(200, 1),
        cov_limit=None,
        cov_delay="1000",
        curve_limit=None,
        timeout=24 * 3600.0,
    ),
}

N_INSTANCES = {"electricity": 45_312, "covtype": 581_012, "airlines": 539_383}


def n_of(dataset: str, limit: int | None) -> int:
    n = N_INSTANCES[dataset]
    return n if limit is None else min(n, limit)


def stream_label(dataset: str, limit: int | None) -> str:
    n = N_INSTANCES[dataset]
    if limit is None or limit >= n:
        return f"{dataset} whole ({n:,})"
    return f"{dataset} prefix {limit:,}"


def experiment_config(
    dataset: str, learners: Sequence[str], *, limit: int | None, delay: str = "0", **kw: Any
) -> dict[str, Any]:
    """The ``ExperimentConfig`` (as a dict, the form a job carries) of a bench run."""
    from streameval.pipeline.config import ExperimentConfig

    kw.setdefault("snapshot_every", 0)  # final results only, as the peers compute
    return ExperimentConfig(
        stream=f"bench-{dataset}",
        learners=list(learners),
        dataset=dataset,
        limit=limit,
        delay=delay,
        **kw,
    ).to_dict()
