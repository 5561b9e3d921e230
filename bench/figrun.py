"""What the figure modes (``figure5``, ``figure8``, ``scale``) share around their measurements:
which servers to run, redrawing a PNG from its JSON, and saving a run (JSON, PNG, the load line)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

from zkpy.testing.servers import apache_available

Draw = Callable[[dict[str, Any], str], None]


def server_kinds(args: argparse.Namespace, log: Callable[[str], None]) -> list[str]:
    """The implementations of ``--servers``, less Apache ZooKeeper where it is not installed."""
    kinds = [k.strip() for k in args.servers.split(",") if k.strip()]
    if "apache" in kinds and not apache_available():
        log("Apache ZooKeeper is not installed: skipping it")
        kinds.remove("apache")
    return kinds


def replot(args: argparse.Namespace, draw: Draw) -> int:
    """``--plot-only``: the PNG drawn again from the JSON of an earlier run."""
    with open(args.json, encoding="utf-8") as f:
        draw(json.load(f), args.png)
    return 0


def save(args: argparse.Namespace, key: str, items: Sequence[Any], load_before: tuple[float, ...],
         started: float, draw: Draw) -> dict[str, Any]:
    """Write the run's JSON (the machine, the load around it, the arguments and ``items`` under
    ``key``) and its PNG, print the load line, and return the data."""
    data: dict[str, Any] = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                            "python": platform.python_version(), "load_before": load_before,
                            "load_after": os.getloadavg(), "seconds": time.monotonic() - started,
                            "args": vars(args), key: items}
    for path in (args.json, args.png):
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
    try:
        draw(data, args.png)
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        print(f"no figure: matplotlib is not installed (pip install -e '.[bench]'); the numbers are in "
              f"{args.json}, and --plot-only draws {args.png} from them")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{' '.join(f'{x:.2f}' for x in data['load_after'])}; run took {data['seconds']:.0f} s")
    return data
