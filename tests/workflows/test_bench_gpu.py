"""The accelerator check on its CPU fallback path (this machine has no GPU) and its script's arguments."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from workflows import bench_gpu
from workflows._common import bench_args

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(bench_gpu.gpu_available(), reason="the fallback path is taken only without a GPU")
def test_gpu_check_takes_the_cpu_fallback_path_and_writes_one_report(tmp_path):
    args = bench_args(bench_gpu, ["--skip-tests"], n_rows=2e4, m0=[48], chunk_rows=5000, repeats=1,
                      profile_rows=[300], out=str(tmp_path))
    res = bench_gpu.run(args)
    assert res["path"] == "cpu-fallback" and res["device"] is None
    assert res["tests"] == {"ran": False, "reason": "--skip-tests"}
    assert {r["variant"] for r in res["runs"]} == {"in memory", "zarr, page cache"}
    for run in res["runs"]:
        assert run["median_s"] > 0 and "ratio_to_cupy_bound" not in run
    saved = json.loads((tmp_path / "bench-gpu.json").read_text())
    assert saved["pass"]["n_rows"] == 20000 and saved["pass"]["device"] == "cpu"
    md = (tmp_path / "bench-gpu.md").read_text()
    assert "path: cpu-fallback" in md and "One tile, part by part" in md
    (profile,) = saved["tile_profile"]
    assert (profile["m0"], profile["rows"]) == (48, 300)
    assert set(profile["ms"]) == {"tile", "features in slabs", "syrk", "compensated add"}  # the host tile
    assert all(v > 0 for v in profile["ms"].values())


def test_gpu_test_selection_names_existing_tests():
    for node in bench_gpu.GPU_TESTS:
        path, _, name = node.partition("::")
        assert (ROOT / path).exists(), node
        assert not name or f"def {name}(" in (ROOT / path).read_text(), node


def test_gpu_check_script_refuses_unknown_options_and_prints_help():
    script = ROOT / "scripts" / "gpu-check"
    bad = subprocess.run([str(script), "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip() == "gpu-check: error: unknown option --bogus (see --help)"
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "--wheelhouse" in usage.stdout and "CPU fallback" in usage.stdout
