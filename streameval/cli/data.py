"""``streameval data``: where the real datasets are, and fetching them ahead of use.

``streameval data list`` prints, for each real dataset, where its verified file is (the
data directory, the package) or that it is not downloaded yet, with the accepted files
and their SHA-256. ``streameval data fetch NAME ...`` downloads now what a first use
would download (:mod:`streameval.pipeline.streams.locate`), even with
``STREAMEVAL_DOWNLOAD=0``.
"""

from __future__ import annotations

import argparse
from typing import Any

from streameval.pipeline.spec import SpecError
from streameval.pipeline.streams.locate import data_directory, find, locate, packaged_path
from streameval.pipeline.streams.real import REAL_DATASETS


def cmd_list(args: argparse.Namespace) -> int:
    directory, how = data_directory(args.data_dir)
    print(f"data directory: {directory} ({how})")
    for name, info in REAL_DATASETS.items():
        path = find(info, args.data_dir)
        if path is None:
            where = "not downloaded" if info.download else "not found (place it by hand)"
        else:
            source = "package" if path == packaged_path(info) else "data directory"
            where = f"{source}: {path} ({path.stat().st_size / 1e6:.1f} MB)"
        print(f"{name:<12} {where}")
        for form in info.files:
            print(f"{'':<12}   accepts {form.name} sha256 {form.sha256}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    unknown = [n for n in args.names if n not in REAL_DATASETS]
    if unknown:
        raise SpecError(f"unknown dataset {unknown[0]!r} (real: {', '.join(REAL_DATASETS)})")
    for name in args.names:
        path = locate(REAL_DATASETS[name], args.data_dir, download=True)
        print(f"{name}: {path}")
    return 0


def add_data_command(sub: Any) -> argparse.ArgumentParser:
    """Add ``streameval data {list,fetch}`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "data",
        help="where the real datasets are; download them ahead of use",
        description=__doc__.split("\n\n", 1)[1].strip(),
    )
    p.add_argument(
        "--data-dir", default=None, help="directory of the dataset files ($STREAMEVAL_DATA_DIR)"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="each dataset, where it is, the files it accepts").set_defaults(
        handler=cmd_list
    )
    fetch = actions.add_parser("fetch", help="download datasets now (verified, into the cache)")
    fetch.add_argument("names", nargs="+", metavar="NAME", help=", ".join(REAL_DATASETS))
    fetch.set_defaults(handler=cmd_fetch)
    return p
