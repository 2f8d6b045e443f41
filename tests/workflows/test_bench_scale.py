"""Smoke tests of ``dxrf bench outofcore`` and ``dxrf bench scaling`` at tiny sizes.

Each benchmark's ``run()`` is called with options parsed by its own
``add_arguments`` (as the CLI does), on data of a few MiB in ``tmp_path``,
with the page cache left alone (``--warm``). The tests assert on what was
computed and written, not on speed: timings at this size are mostly fixed
costs.
"""

from __future__ import annotations

import json
import math
import tempfile

import dask.array as da
import numpy as np
import pytest
from distributed import Client
from dxrf.workflows import bench_outofcore, bench_scaling
from dxrf.workflows._common import bench_args

import dxrf
from dxrf.cli.commands import build_parser
from dxrf.cluster import local_cluster

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


_args = bench_args


def test_cli_discovers_both_benchmarks():
    parser = build_parser()
    assert parser.parse_args(["bench", "outofcore"]).workflow_module == "bench_outofcore"
    assert parser.parse_args(["bench", "scaling", "--n-rows", "1e5", "1e6"]).workflow_module == "bench_scaling"


def test_outofcore_rejects_a_remote_scheduler():
    args = _args(bench_outofcore, [])
    args.scheduler = "tcp://127.0.0.1:1"
    with pytest.raises(ValueError, match="scheduler"):
        bench_outofcore.run(args)


def _pause(dask_worker) -> None:
    from distributed.core import Status

    dask_worker.status = Status.paused


def test_outofcore_cancels_a_pass_stuck_on_a_paused_worker():
    # without a memory limit nothing resumes the worker: the pass can never end
    # its own cluster: the worker stays paused
    with local_cluster(1, memory_limit=0, dashboard_address=":0") as cluster, Client(cluster) as client:
        client.run(_pause)
        X = da.ones((1000, 4), chunks=(500, 4), dtype=np.float32)
        fmap = dxrf.RandomFourierFeatures(8, random_state=0).fit(np.zeros((1, 4), dtype=np.float32))
        t, times, stats, error = bench_outofcore._watched_pass(client, X, fmap, 1, None, stall_s=2.0)
    assert math.isnan(t) and times == [] and stats is None
    assert error.startswith("stalled"), error


def test_outofcore_smoke(tmp_path, monkeypatch):
    # the default work dir is a temp dir that must be removed afterwards
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    out = tmp_path / "out"
    args = _args(
        bench_outofcore,
        [
            "--data-gib", "0.008",  # ~8 MiB
            "--worker-memory", "512MiB",
            "--m0", "64",
            "--chunk-rows", "2000",
            "--in-memory-fraction", "0.25",
            "--in-memory-repeats", "2",
            "--warm",
            "--out", str(out),
        ],
    )  # fmt: skip
    res = bench_outofcore.run(args)

    assert res["n_rows"] == 24_000 and res["in_memory_rows"] == 6_000
    for flag in ("completed", "no_worker_lost", "no_pause", "peak_below_limit"):
        assert res[flag] is True, (flag, res["out_of_core"])
    assert isinstance(res["ratio_within_target"], bool)
    assert math.isfinite(res["ratio_per_row"]) and res["ratio_per_row"] > 0
    ooc = res["out_of_core"]
    assert ooc["error"] is None
    assert len(ooc["peak_rss"]) == 2
    assert all(0 < p < 512 * 2**20 for p in ooc["peak_rss"].values())
    assert ooc["incidents"]["pauses"] == 0 and ooc["incidents"]["log_lines"] == []
    assert len(res["in_memory"]["times_s"]) == 2
    assert res["memory_thresholds"]["pause"] == pytest.approx(0.8)  # Dask's default, left alone

    saved = json.loads((out / "bench-outofcore.json").read_text())
    assert saved["ratio_per_row"] == pytest.approx(res["ratio_per_row"])
    assert "out of core" in (out / "bench-outofcore.md").read_text()
    assert not list(scratch.glob("dxrf-bench-*")), "the temporary zarr data were not removed"


def test_scaling_smoke(tmp_path):
    out = tmp_path / "out"
    args = _args(
        bench_scaling,
        [
            "--n-rows", "20000", "2000",
            "--ref-rows", "2000",
            "--m0", "64",
            "--chunk-rows", "1000",
            "--worker-memory", "512MiB",
            "--repeats", "2",
            "--repeats-largest", "1",
            "--warm",
            "--workdir", str(tmp_path / "work"),
            "--out", str(out),
        ],
    )  # fmt: skip
    res = bench_scaling.run(args)

    runs = {r["n_rows"]: r for r in res["runs"]}
    assert sorted(runs) == [2000, 20000] and res["ref_rows"] == 2000
    assert runs[2000]["repeats"] == 2 and runs[20000]["repeats"] == 1
    assert runs[2000]["time_per_row_ratio"] == 1.0 and runs[2000]["peak_ratio"] == 1.0
    for r in runs.values():
        assert math.isfinite(r["time_per_row_ratio"]) and r["time_per_row_ratio"] > 0
        assert len(r["peak_rss"]) == 2 and 0 < r["max_peak_rss"] < 512 * 2**20
    assert res["time_per_row_ratio_largest"] == runs[20000]["time_per_row_ratio"]
    assert isinstance(res["time_per_row_within_target"], bool) and isinstance(res["peak_flat"], bool)
    assert res["workers"] == 2 and res["worker_memory_limit"] == 512 * 2**20

    saved = json.loads((out / "bench-scaling.json").read_text())
    assert [r["n_rows"] for r in saved["runs"]] == [2000, 20000]
    assert "| 20000 |" in (out / "bench-scaling.md").read_text()
    assert (tmp_path / "work" / "X.zarr").exists()  # a given work dir is kept
