"""``python -m bench figure5 / figure8 / scale``'s plumbing, without servers: options, tables, the PNGs
drawn from their JSON, and the process-tree CPU count.

No timing asserts; the modes themselves are exercised by running them (BENCHMARKS.md, issue 15).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench import figrun, figure5, figure8, memory, scale

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_quick_shortens_the_defaults_and_explicit_flags_win() -> None:
    assert (figure5.parse_args([]).sizes, figure5.parse_args([]).duration) == ("3,5", 4.0)
    quick = figure5.parse_args(["--quick", "--reads", "0,50,100"])
    assert quick.sizes == "3" and quick.reads == "0,50,100" and quick.duration < 4.0
    assert figure8.parse_args([]).time_scale == 1.0 and figure8.parse_args(["--quick"]).time_scale < 1.0
    assert scale.parse_args(["--quick"]).workers == "1"
    assert scale.parse_args(["--workers", "1,4"]).workers == "1,4"
    assert scale.parse_args([]).workers_key == "serverWorkers"


def test_the_schedule_is_the_papers_list_in_order() -> None:
    marks = [mark for _, mark, _ in figure8.SCHEDULE]
    assert marks == ["1", "1 back", "2", "2 back", "3", "3 back", "4a", "4b", "4c", "5", "6"]
    times = [t for t, _, _ in figure8.SCHEDULE]
    assert times == sorted(times) and times[-1] < figure8.END_S
    killed = {a[2] for _, _, a in figure8.SCHEDULE if a[0] == "kill"}
    restarted = {name for _, _, a in figure8.SCHEDULE if a[0] == "restart" for name in a[1:]}
    assert killed == restarted  # every server killed comes back


def _figure5_data() -> dict[str, Any]:
    runs = [{"server": k, "size": n, "load_at_start": 1.0,
             "points": [{"reads_pct": p, "ops_per_s": 1000.0 + p * (10 if k == "zkpy" else 5), "errors": 0}
                        for p in (0, 50, 100)]}
            for n in (3, 5) for k in ("zkpy", "apache")]
    return {"machine": "test", "load_before": [1.0, 1.0, 1.0], "runs": runs,
            "args": {"sessions_total": 48, "outstanding": 11, "value_size": 1024, "duration": 1.0}}


def _figure8_data() -> dict[str, Any]:
    events = [{"t": 0.5, "mark": "1", "action": "kill follower", "myids": [1], "waited_s": 0.0},
              {"t": 1.0, "mark": "1 back", "action": "restart f1", "myids": [1], "serving_s_1": 0.4},
              {"t": 1.5, "mark": "3", "action": "kill leader", "myids": [], "error": "no leader"}]
    run = {"server": "zkpy", "bin_ms": 250, "seconds": 2.5, "ops_per_s": [100.0, 200.0, 0.0, 200.0, 300.0] * 2,
           "errors_per_bin": [0] * 10, "events": events, "moves": [0.6, 0.61], "sessions": 4, "leader_at_start": 3}
    return {"machine": "test", "load_before": [1.0, 1.0, 1.0], "runs": [run],
            "args": {"size": 3, "writes": 0.3, "value_size": 1024, "sessions_total": 4, "outstanding": 2,
                     "bin_ms": 250}}


def test_tables_show_ratios_and_events() -> None:
    t5 = figure5.table(_figure5_data()["runs"])
    assert "x3 zkpy/ZK" in t5 and "| 100 | 2,000 | 1,500 | 1.33x |" in t5
    runs = _figure8_data()["runs"]
    summary, events = figure8.summary_table(runs), figure8.event_table(runs)
    assert "| zkpy |" in summary and "| 2 |" in summary  # two bins with no completed request
    assert "1: 0.40" in events and "no leader" in events


def test_the_pngs_are_drawn_from_the_json(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [{"server": "zkpy", "processes": n, "load": "read", "ops_per_s": 100.0 * n, "cpu_us_per_op": 9.0}
            for n in (1, 2)] + [{"server": "apache", "processes": None, "load": "read", "ops_per_s": 120.0,
                                 "cpu_us_per_op": 12.0}]
    cases = [(figure5, _figure5_data()), (figure8, _figure8_data()),
             (scale, {"machine": "test", "load_before": [1.0] * 3, "rows": rows,
                      "args": {"processes": 2, "sessions": 16, "outstanding": 16, "duration": 1.0}})]
    for module, data in cases:
        src, png = tmp_path / f"{module.__name__}.json", tmp_path / f"{module.__name__}.png"
        src.write_text(json.dumps(data))
        assert module.main(["--plot-only", "--json", str(src), "--png", str(png)]) == 0
        assert png.read_bytes()[:8] == PNG_MAGIC


def test_the_process_tree_counts_children() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        tree = scale.process_tree(os.getpid())
        assert os.getpid() in tree and child.pid in tree
        assert all(cpu >= 0 for cpu in tree.values())
        assert scale.process_tree(child.pid) == {child.pid: tree[child.pid]}
    finally:
        child.kill()
        child.wait()


def test_a_run_without_matplotlib_keeps_its_numbers_and_says_how_to_draw_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def no_matplotlib(_data: dict[str, Any], _png: str) -> None:
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    args = argparse.Namespace(json=str(tmp_path / "run.json"), png=str(tmp_path / "run.png"))
    figrun.save(args, "rows", [{"ops": 1}], (0.0, 0.0, 0.0), 0.0, no_matplotlib)
    assert json.loads((tmp_path / "run.json").read_text())["rows"] == [{"ops": 1}]
    assert "matplotlib is not installed" in capsys.readouterr().out and not (tmp_path / "run.png").exists()

    def other_module_missing(_data: dict[str, Any], _png: str) -> None:
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    with pytest.raises(ModuleNotFoundError):
        figrun.save(args, "rows", [], (0.0, 0.0, 0.0), 0.0, other_module_missing)


def test_memory_reads_this_process_and_totals_pss() -> None:
    """``bench memory``'s /proc readings of a live process, and its table's PSS total."""
    assert (memory._kib(os.getpid(), "status", "VmRSS:") or 0) > 0
    assert (memory._kib(os.getpid(), "smaps_rollup", "Pss:") or 0) > 0
    assert memory._kib(os.getpid(), "status", "NoSuchKey:") is None
    rows = [{"pid": 1, "role": "member", "rss_mib": 40.0, "pss_mib": 30.0},
            {"pid": 2, "role": "worker", "rss_mib": 38.0, "pss_mib": 28.0}]
    text = memory.table([{"server": "zkpy", "workers": 2, "processes": rows, "pss_total_mib": 58.0}])
    assert "| zkpy | 2 | worker | 38 | 28 |" in text and "**58**" in text
