"""The experiment on the command line: its options (shared by ``evaluate``, ``run`` and
``submit``, so that the drivers run the same experiment), the config they make, and what
``evaluate`` and ``run`` print and write.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from streameval.cli.report import add_report_option, report_from_args
from streameval.pipeline.config import ExperimentConfig

DEFAULT_LEARNERS = ["nochange", "majority", "nb", "ht", "ta:ht"]

EPILOG_SPECS = """\
learner specs: nochange, majority, majority[window=W], nb, ht, hat, knn, arf,
  wrappers as prefixes: ta:ht (l=1 past label), ta3:ht (l=3), ta2[fill=predicted]:nb,
  tc:nb (temporal correction), tc[alpha=0.01]:ht; regression: mean, linreg, htr.
delay specs: 0 | N (label N instances later) | time:S (S seconds of event time) |
  day-ahead (a day's features at the midnight a day ahead, labels at each half-hour's end) |
  natural (electricity: one day; airlines: landing time; covtype: 1000 instances).
datasets: electricity, covtype, airlines (from $STREAMEVAL_DATA_DIR), synthetic
  sea, hyperplane, agrawal, led, markov[p_stay=0.9], ... (see docs).
detectors: ph, ph[estimator=fading,alpha=0.999], ratio_fading, ratio_window, adwin,
  ddm, random[p=0.01].
"""


def add_experiment_options(p: argparse.ArgumentParser, outputs: bool = True) -> None:
    """The options that define an experiment (shared by evaluate, run and submit); with
    ``outputs``, also where the results go (``--json``, ``--plot``, ``--report``), which
    ``submit`` has not: the worker publishes them."""
    g = p.add_argument_group("stream")
    g.add_argument(
        "--dataset",
        required=True,
        help="dataset spec: electricity, sea[n=20000], csv:PATH[...], arff:PATH[...]",
    )
    g.add_argument("--limit", type=int, default=None, help="use only the first N instances")
    g.add_argument(
        "--delay", default="0", help="label delay: 0, N, time:S, day-ahead or natural (default 0)"
    )
    g.add_argument(
        "--stream-id", default=None, help="stream id in outputs (default: the dataset spec)"
    )
    g.add_argument(
        "--data-dir",
        default=None,
        help="directory of the dataset files (default: $STREAMEVAL_DATA_DIR)",
    )
    g = p.add_argument_group("learners and metrics")
    g.add_argument(
        "--learner",
        action="append",
        default=None,
        metavar="SPEC",
        help=f"a learner spec, repeatable (default: {' '.join(DEFAULT_LEARNERS)})",
    )
    g.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="W",
        help="also estimate every metric on a sliding window of W labels",
    )
    g.add_argument(
        "--fading",
        type=float,
        default=None,
        metavar="A",
        help="also estimate every metric with fading factor A (e.g. 0.999)",
    )
    g.add_argument(
        "--positive",
        default=None,
        help="positive class for AUC (default: the dataset's, binary streams only)",
    )
    g.add_argument(
        "--auc-window",
        type=int,
        default=1000,
        help="sliding window of the prequential AUC when --window is not given",
    )
    g.add_argument("--seed", type=int, default=0, help="seed of randomised learners/detectors")
    g = p.add_argument_group("continuous re-evaluation (delayed labels)")
    g.add_argument(
        "--reeval-k",
        type=int,
        default=None,
        metavar="K",
        help="re-predict every pending instance every K labels",
    )
    g.add_argument(
        "--bins",
        type=int,
        default=50,
        metavar="B",
        help="number of bins between first prediction and label (default 50; 0: only "
        "the first prediction and test-then-train)",
    )
    g.add_argument(
        "--weights",
        default="uniform",
        help="Psi_W weights: first-time, test-then-train, uniform, exponential "
        "or a comma-separated vector of B+2 weights",
    )
    g.add_argument(
        "--pending-cap",
        type=int,
        default=1_000_000,
        help="most pending instances kept; the oldest beyond it are evicted and counted",
    )
    g.add_argument(
        "--protocol",
        choices=("papers", "moa"),
        default="papers",
        help="details the papers leave open: decided as documented (papers) or as the "
        "authors' MOA code does (moa: cold start at class 0, labels first at equal times, "
        "MOA's re-prediction schedule, bins and kappa references)",
    )
    g.add_argument(
        "--stop-at-labels",
        type=int,
        default=None,
        metavar="N",
        help="end the experiment once N labels are scored (the stream runs on until then)",
    )
    g = p.add_argument_group("drift detection")
    g.add_argument(
        "--detector",
        action="append",
        default=[],
        metavar="SPEC",
        help="attach a drift detector to every learner's error stream (repeatable)",
    )
    g.add_argument(
        "--drift-reset",
        action="store_true",
        help="rebuild a learner from its spec whenever one of its detectors alarms",
    )
    g = p.add_argument_group("output")
    g.add_argument(
        "--snapshot-every",
        type=int,
        default=None,
        metavar="N",
        help="emit a metrics snapshot every N labels; 0: only at the end "
        "(default: every 1%% of a stream of known length, else every 1000 labels)",
    )
    if not outputs:
        return
    g.add_argument("--json", default=None, metavar="FILE", help="write the results JSON here")
    g.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="with --reeval-k: write the binned accuracy plot here (default: next to --json)",
    )
    add_report_option(g)
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    bins = getattr(args, "config_sources", {}).get("bins")
    if args.reeval_k is None and bins is not None and bins.kind != "default":
        where = f" ({bins})" if bins.kind != "flag" else ""
        raise ValueError(f"--bins{where} needs --reeval-k (the bins divide a re-evaluated wait)")
    return ExperimentConfig(
        stream=args.stream_id or args.dataset,
        learners=args.learner or list(DEFAULT_LEARNERS),
        window=args.window,
        fading=args.fading,
        reeval_k=args.reeval_k,
        bins=args.bins if args.reeval_k is not None else 0,
        weights=args.weights,
        detectors=list(args.detector),
        drift_reset=args.drift_reset,
        positive=args.positive,
        auc_window=args.auc_window,
        pending_cap=args.pending_cap,
        snapshot_every=args.snapshot_every,
        seed=args.seed,
        dataset=args.dataset,
        delay=args.delay,
        limit=args.limit,
        protocol=getattr(args, "protocol", "papers"),
        stop_at_labels=getattr(args, "stop_at_labels", None),
    )


def print_results(results: dict[str, Any], out: Any = None) -> None:
    """The tables ``evaluate`` and ``run`` print."""
    from streameval.pipeline.report.table import results_text

    print(results_text(results), file=out or sys.stdout)


def _from_file(args: argparse.Namespace, dest: str) -> str:
    """`` (json from streameval.toml:16)`` when a config file named this output path."""
    source = getattr(args, "config_sources", {}).get(dest)
    return f" ({dest} from {source.name})" if source is not None and source.kind == "file" else ""


def write_outputs(results: dict[str, Any], args: argparse.Namespace) -> None:
    """--json and --plot."""
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {path}{_from_file(args, 'json')}", file=sys.stderr)
    if results["config"].get("reeval_k"):
        plot = args.plot or (str(Path(args.json).with_suffix(".binned.png")) if args.json else None)
        if plot:
            from streameval.pipeline.report.plots import plot_binned

            plot_binned(results, plot)
            print(f"binned accuracy plot written to {plot}", file=sys.stderr)
    report_from_args(results, args)
