"""Benchmark: the accelerator check, in one command and one JSON report.

On a machine with CUDA and CuPy it
1. records the device (name, memory, driver, CuPy and CUDA versions);
2. runs the GPU tests (the pytest files that use CuPy blocks) and counts
   their outcomes;
3. measures CuPy's own Gram bounds for each ``M0``: ``cupy.matmul(Z.T, Z)``
   (gemm) and cuBLAS ``syrk`` on a 200 000-row block, as N·M0²/s;
4. runs ``dxrf bench pass --gpu`` at those ``M0`` (one GPU worker; CuPy
   blocks) and divides the pass time by the better of the two bounds;
5. profiles one tile of the pass on the device, part by part, at the
   pass's tile size and at the larger ``--profile-rows``
   (:func:`tile_profile`).

Without a GPU it takes its CPU fallback path: the same tests (which then
skip), and ``bench pass`` on the CPU workers at the size given, so that the
script is exercised where it is kept. ``scripts/gpu-check`` installs what
this needs and runs it.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DESCRIPTION = "the accelerator check: GPU tests and the GPU pass against CuPy's gemm/syrk bound (CPU fallback)"

# the tests that run CuPy blocks or the device branch (they skip without a GPU)
GPU_TESTS = ("tests/core/test_device.py", "tests/core/test_weights.py::test_weighted_cupy_blocks_match_numpy")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-rows", type=float, default=1e6, help="rows N of the pass (default 1e6)")
    parser.add_argument("--m0", type=int, nargs="+", default=[2000, 4000], help="feature counts M0 (default 2000 4000)")
    parser.add_argument("--n-features", type=int, default=90, help="input columns d (default 90)")
    parser.add_argument("--chunk-rows", type=int, default=100_000, help="rows per chunk (default 100000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each pass (median; default 3)")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the GPU tests")
    parser.add_argument(
        "--profile-rows", type=int, nargs="*", default=[10_000, 50_000],
        help="tile sizes (rows) of the per-part tile profile (default 10000 50000; none: no profile)",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="take the CPU fallback path even where a GPU is present"
    )
    parser.add_argument("--out", default="results", help="results folder")


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean the fallback path
        return False


def device_info() -> dict[str, Any]:
    """What the report says about the accelerator (empty fields without one)."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "memory_gib": props["totalGlobalMem"] / 2**30,
        "multiprocessors": int(props["multiProcessorCount"]),
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cupy": cupy.__version__,
    }


def run_tests(out: Path) -> dict[str, Any]:
    """Run :data:`GPU_TESTS` in a subprocess; their outcome counts from pytest's JUnit XML."""
    import xml.etree.ElementTree as ET

    root = Path(__file__).resolve().parent.parent
    files = [f for f in GPU_TESTS if (root / f.split("::")[0]).exists()]
    if not files:
        return {"ran": False, "reason": "the test files are not beside this package (an installed copy)"}
    xml = out / "gpu-tests.xml"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *files],
        cwd=root, capture_output=True, text=True,
    )
    seconds = time.perf_counter() - t0
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if xml.exists():
        for suite in ET.parse(xml).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"ran": True, "files": files, "exit_code": proc.returncode, "seconds": seconds,
            **counts, "tail": proc.stdout[-2000:]}


def cupy_gram_bounds(m0: int, dtype: str = "float32", rows: int = 200_000, repeats: int = 5) -> dict[str, float]:
    """N·M0²/s of CuPy's gemm (``Z.T @ Z``) and cuBLAS ``syrk`` on one device block."""
    import cupy
    from cupy import cublas

    from ._common import median_time

    Z = cupy.cos(cupy.random.default_rng(0).standard_normal((rows, m0))).astype(dtype)
    G = cupy.empty((m0, m0), dtype=dtype)

    def gemm() -> None:
        cupy.matmul(Z.T, Z, out=G)
        cupy.cuda.Device().synchronize()

    def syrk() -> None:
        cublas.syrk("T", Z, out=G, lower=True)
        cupy.cuda.Device().synchronize()

    rates = {}
    for name, fn in (("gemm", gemm), ("syrk", syrk)):
        fn()  # warm up (handles, kernels)
        t, _, _ = median_time(fn, repeats)
        rates[f"{name}_gflops"] = rows * m0 * m0 / t / 1e9
    del Z, G
    cupy.get_default_memory_pool().free_all_blocks()
    return rates


def tile_profile(m0: int, rows: int, d: int = 90, repeats: int = 5, on_gpu: bool = True) -> dict[str, float]:
    """Median milliseconds of one tile of the statistics pass and of its parts.

    The parts are :func:`dxrf.stats.tile_timings`' (the pass's own calls on
    its own buffers) on a device tile, with CuPy's GEMM ``Z.T @ Z`` of the same
    shape beside them. ``on_gpu`` False times the host tile (the CPU fallback
    path) and no GEMM.
    """
    import numpy as np

    import dxrf
    from dxrf.stats import tile_timings

    fmap = dxrf.RandomFourierFeatures(m0, bandwidth=float(np.sqrt(d)), dtype="float32", random_state=0)
    kernel = fmap.fit(np.zeros((1, d))).kernel_
    X = np.random.default_rng(0).standard_normal((rows, d)).astype(np.float32)
    if not on_gpu:
        return {k: 1e3 * v for k, v in tile_timings(kernel, X, repeats).items()}
    import cupy

    out = {k: 1e3 * v for k, v in tile_timings(kernel, cupy.asarray(X), repeats).items()}
    out["gemm"] = 1e3 * rows * m0 * m0 / cupy_gram_bounds(m0, rows=rows, repeats=repeats)["gemm_gflops"] / 1e9
    return out


def run(args: argparse.Namespace) -> dict:
    from . import bench_pass
    from ._common import bench_args, report, table

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    on_gpu = gpu_available() and not args.cpu
    results: dict[str, Any] = {
        "path": "gpu" if on_gpu else "cpu-fallback",
        "host": platform.node(),
        "python": platform.python_version(),
        "device": device_info() if on_gpu else None,
    }
    results["tests"] = {"ran": False, "reason": "--skip-tests"} if args.skip_tests else run_tests(out)
    bounds = {m0: cupy_gram_bounds(m0) for m0 in args.m0} if on_gpu else {}
    pass_args = bench_args(
        bench_pass,
        ["--gpu"] if on_gpu else [],
        n_rows=args.n_rows, m0=list(args.m0), n_features=args.n_features, chunk_rows=args.chunk_rows,
        repeats=args.repeats, no_zarr=False, warm=True, out=str(out / "pass"),
    )
    passes = bench_pass.run(pass_args)
    results["pass"] = passes
    rows = []
    for entry in passes["runs"]:
        m0 = entry["m0"]
        flops = passes["n_rows"] * m0 * m0
        if on_gpu:
            best = max(bounds[m0].values())
            entry = {**entry, **bounds[m0], "cupy_bound_s": flops / best / 1e9,
                     "ratio_to_cupy_bound": flops / best / 1e9 / entry["median_s"]}
        rows.append([entry["variant"], m0, entry["median_s"], flops / entry["median_s"] / 1e9,
                     bounds.get(m0, {}).get("gemm_gflops", float("nan")),
                     bounds.get(m0, {}).get("syrk_gflops", float("nan")),
                     entry.get("ratio_to_cupy_bound", entry["ratio_to_bound"])])
        results.setdefault("runs", []).append(entry)
    md = table(["variant", "M0", "median s", "pass GFLOP/s", "CuPy gemm GFLOP/s", "cuBLAS syrk GFLOP/s",
                "bound / time"], rows)
    if args.profile_rows:
        profiles = [
            {"m0": m0, "rows": r, "ms": tile_profile(m0, r, args.n_features, on_gpu=on_gpu)}
            for m0 in args.m0 for r in args.profile_rows
        ]
        results["tile_profile"] = profiles
        parts = list(profiles[0]["ms"])
        md += "\n\nOne tile, part by part (median ms):\n\n" + table(
            ["M0", "tile rows", *parts], [[p["m0"], p["rows"], *p["ms"].values()] for p in profiles]
        )
    tests = results["tests"]
    md += (f"\n\npath: {results['path']}; tests: " + (
        f"{tests['passed']} passed, {tests['skipped']} skipped, {tests['failures'] + tests['errors']} failed"
        if tests.get("ran") else tests["reason"]))
    return report(out, "bench-gpu", results, md)
