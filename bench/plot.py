"""PNG figures for ``python -m bench figure5 / figure8 / scale`` (matplotlib, headless).

matplotlib is imported only when a figure is drawn (it is in the ``bench`` extra, not a dependency
of zkpy), with the non-interactive Agg backend, so a run on a machine without a display works.
Every function takes plain numbers (what the JSON files hold), so a figure can be redrawn from a
JSON file with ``--plot-only``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NAMES = {"zkpy": "zkpy", "apache": "ZooKeeper 3.8"}
STYLES = {"zkpy": "-", "apache": "--"}
MARKERS = ("o", "s", "^", "D", "v", "P")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure5(path: str, curves: Mapping[str, Mapping[int, Sequence[tuple[float, float]]]], title: str) -> None:
    """Throughput against the percentage of reads: ``curves[impl][servers]`` = [(read %, ops/s), ...]."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    sizes = sorted({size for by_size in curves.values() for size in by_size})
    for impl, by_size in curves.items():
        for size, points in sorted(by_size.items()):
            i = sizes.index(size)  # colour and marker: the size; line style: the implementation
            pts = sorted(points)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], STYLES.get(impl, "-"), color=f"C{i}",
                    marker=MARKERS[i % len(MARKERS)], label=f"{NAMES.get(impl, impl)}, {size} servers")
    ax.set_xlabel("Percentage of read requests")
    ax.set_ylabel("Operations per second")
    ax.set_xlim(0, 100)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure8(path: str, panels: Sequence[tuple[str, float, Sequence[float], Sequence[tuple[float, str]]]],
            title: str) -> None:
    """Throughput over time, one panel per implementation: (label, bin seconds, ops/s per bin, events),
    each event (seconds, label) drawn as a vertical line with its label."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.2 * len(panels)), sharex=True, squeeze=False)
    top = max((max(rates, default=0.0) for _, _, rates, _ in panels), default=0.0) * 1.15 or 1.0
    for ax, (label, bin_s, rates, events) in zip(axes[:, 0], panels):
        xs = [(i + 0.5) * bin_s for i in range(len(rates))]
        ax.plot(xs, rates, "-", linewidth=1.2)
        ax.set_ylim(0, top)
        ax.set_ylabel("ops/s")
        ax.set_title(label, fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
        for i, (t, name) in enumerate(events):
            ax.axvline(t, color="tab:red", linewidth=0.8, alpha=0.7)
            ax.text(t, top * (0.97 - 0.08 * (i % 3)), f" {name}", fontsize=7, color="tab:red", va="top")
    axes[-1, 0].set_xlabel("seconds")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scale(path: str, rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """ops/s and server CPU-µs per op against the number of serving processes; Apache as a flat reference.

    ``rows``: dicts with ``server`` ("zkpy" / "apache"), ``processes`` (None for Apache), ``load``,
    ``ops_per_s`` and ``cpu_us_per_op``."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    loads = sorted({r["load"] for r in rows})
    for i, load in enumerate(loads):
        z = sorted((r for r in rows if r["load"] == load and r["server"] == "zkpy"), key=lambda r: r["processes"])
        a = [r for r in rows if r["load"] == load and r["server"] == "apache"]
        xs = [r["processes"] for r in z]
        marker = MARKERS[i % len(MARKERS)]
        ax1.plot(xs, [r["ops_per_s"] for r in z], "-", marker=marker, label=f"zkpy, {load}")
        ax2.plot(xs, [r["cpu_us_per_op"] for r in z], "-", marker=marker, label=f"zkpy, {load}")
        for r in a:
            ax1.axhline(r["ops_per_s"], linestyle="--", color=f"C{i}", alpha=0.6, label=f"ZooKeeper 3.8, {load}")
            if r["cpu_us_per_op"] is not None:
                ax2.axhline(r["cpu_us_per_op"], linestyle="--", color=f"C{i}", alpha=0.6,
                            label=f"ZooKeeper 3.8, {load}")
    for ax, ylabel in ((ax1, "operations per second"), (ax2, "server CPU-µs per operation")):
        ax.set_xlabel("zkpy serving processes")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
