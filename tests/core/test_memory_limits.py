"""Requests whose memory cannot fit are refused before anything is allocated.

Tiny inputs or parameters that ask for huge allocations (a LibSVM index of two
billion, one-hot columns, ``n_candidates=300000``, an ``.npz`` header claiming
a huge shape) must raise a ValueError naming the cause, the estimate and the
limit, not a bare ``MemoryError``, a killed worker or a machine brought down.

Every case runs in a child process under an address-space limit
(``RLIMIT_AS``) and a timeout, so a regression fails its test instead of
exhausting this machine: the child reports the exception it got as JSON.
Command-line cases check the one ``dxrf: error:`` line and exit status 2;
ingest cases also check that nothing is left at the destination.

Also: a client attached to a scheduler without workers gives up after the
configured wait instead of waiting forever.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# address space of the child: enough for `import dxrf` with dask, pandas and
# zarr (about 1.2 GB here with one BLAS thread) and small fits, far below
# what any refused case asks for
LIMIT_MB = 3000

PRELUDE = f"""
import resource
resource.setrlimit(resource.RLIMIT_AS, ({LIMIT_MB} << 20, {LIMIT_MB} << 20))
"""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[var] = "1"  # BLAS threads reserve address space
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _run_child(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env=_child_env(), cwd=ROOT,
    )


# -- the inputs ---------------------------------------------------------------------------------


def _npz_with_header(path: Path, shape: tuple[int, ...], fortran: bool = False) -> None:
    """An .npz whose member 'X' claims ``shape`` but holds only a few bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": fortran, "shape": shape})
    buf.write(np.zeros(16).tobytes())
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("X.npy", buf.getvalue())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mem")
    (root / "index.svm").write_text("1 1:0.5 3:1\n0 2000000000:1\n")
    (root / "small.svm").write_text("1 1:0.5 3:1\n0 2:1\n")
    # 21000 distinct values of 'a' (one-hot: 21000 columns), 7 of 'b'
    rows = ["a,b,y"] + [f"id{i},z{i % 7},{i % 3}" for i in range(21000)]
    (root / "wide.csv").write_text("\n".join(rows) + "\n")
    _npz_with_header(root / "wide.npz", (5, 10**9))
    _npz_with_header(root / "fortran.npz", (10**6, 2000), fortran=True)
    return root


# -- the table ----------------------------------------------------------------------------------

GB = r"[\d,.]+ (GiB|MiB)"
RLIMIT = rf"the address space left under this process's limit \(RLIMIT_AS\) is {GB}"


@dataclasses.dataclass
class Case:
    id: str
    code: str  # Python run in the child; {root} is the inputs folder
    match: str  # regex the message must match
    dest: str | None = None  # a destination that must not exist afterwards


_X = "X = np.random.default_rng(0).normal(size=(60, 3)); y = X[:, 0]"
_RFF = "dxrf.RandomFourierFeatures({m}, bandwidth=1.0, random_state=0)"

CASES = [
    Case("libsvm-huge-index", "dxrf.io.ingest('{root}/index.svm', '{root}/out1.zarr')",
         rf"feature index 2000000000 at line 2 of '.*index.svm' \(it implies 2000000000 dense columns\), written in "
         rf"chunks of chunk_rows=50000 rows, needs about {GB} of memory but {RLIMIT}: .*lower chunk_rows",
         dest="out1.zarr"),
    Case("libsvm-huge-n_features", "dxrf.io.ingest('{root}/small.svm', '{root}/out2.zarr', n_features=10**9)",
         rf"n_features=1000000000, written in chunks .* needs about {GB} of memory but {RLIMIT}", dest="out2.zarr"),
    Case("csv-one-hot-columns",
         "dxrf.io.ingest('{root}/wide.csv', '{root}/out3.zarr', target='y', max_levels=100000)",
         rf"the 21007 encoded columns \(one-hot columns of 'a' \(21000 levels\), 'b' \(7 levels\)\).* needs about "
         rf"{GB} of memory but {RLIMIT}: lower max_levels .*drop_columns", dest="out3.zarr"),
    Case("npz-header-claims-huge-width", "dxrf.io.ingest('{root}/wide.npz', '{root}/out4.zarr')",
         rf"the 1000000000 columns of array 'X'.* needs about {GB} of memory but {RLIMIT}", dest="out4.zarr"),
    Case("npz-fortran-member-read-whole", "dxrf.io.ingest('{root}/fortran.npz', '{root}/out5.zarr', chunk_rows=10)",
         rf"the Fortran-ordered array 'X' of shape \(1000000, 2000\).* needs about 14.90 GiB of memory but {RLIMIT}",
         dest="out5.zarr"),
    Case("ridge-cv-n_candidates",
         f"{_X}; dxrf.RandomFeatureRidgeCV(n_candidates=300000, n_components=[10], random_state=0).fit(X, y)",
         rf"n_candidates=300000 \(5 feature maps x 5 row groups of 300000 x 300000 float64 statistics\) needs about "
         rf"{GB} of memory but {RLIMIT}: use fewer candidates \(n_candidates"),
    Case("classifier-cv-n_candidates-dask",
         f"{_X}; dxrf.RandomFeatureClassifierCV(bandwidths=[1.0], n_candidates=300000, n_components=[10], cv=0.25)"
         ".fit(da.from_array(X, chunks=20), da.from_array(y > 0, chunks=20))",
         rf"n_candidates=300000 \(1 feature map x 2 row groups .*\) needs about {GB} of memory but {RLIMIT}"),
    Case("selector-n_candidates",
         f"{_X}; dxrf.LeverageScoreSampler(10, n_candidates=300000, random_state=0).fit(X)",
         rf"n_candidates=300000 \(1 feature map x 1 row group .*\) needs about {GB} of memory but {RLIMIT}"),
    Case("ridge-with-selector-and-validation",
         f"{_X}; dxrf.RandomFeatureRidge(dxrf.EnergyScoreSelector(10, n_candidates=300000), validation=0.2)"
         ".fit(X, y)",
         rf"n_candidates=300000 \(1 feature map x 2 row groups .*\) needs about {GB} .*{RLIMIT}"),
    Case("ridge-n_components", f"{_X}; dxrf.RandomFeatureRidge({_RFF.format(m=300000)}).fit(X, y)",
         rf"n_components=300000 \(1 feature map x 1 row group .*\) needs about {GB} .*{RLIMIT}: use fewer features"),
    Case("pca-n_components", f"{_X}; dxrf.RandomFeaturePCA(2, features={_RFF.format(m=300000)}).fit(X)",
         rf"n_components=300000 .* needs about {GB} .*{RLIMIT}"),
    Case("accumulate-n_components", f"{_X}; dxrf.accumulate(X, features={_RFF.format(m=300000)})",
         rf"feature map of up to n_components=300000 .* needs about {GB} .*{RLIMIT}"),
    Case("feature-map-projection", f"{_X}; {_RFF.format(m=10**10)}.fit(X)",
         rf"n_components=10000000000 with 3 input columns \(a 3 x 10000000000 projection matrix\) needs about "
         rf"{GB} .*{RLIMIT}: use fewer features"),
    # the features themselves are the result: 300000 x 2000 of them cannot be held (a prediction of the same
    # rows can, one tile of features at a time: the control below)
    Case("transform-numpy-rows",
         f"{_X}; f = {_RFF.format(m=2000)}.fit(X); f.transform(np.zeros((300000, 3)))",
         rf"mapping 300000 rows of NumPy input to 2000 features needs about {GB} .*{RLIMIT}: give fewer rows"),
    Case("transform-dask-chunk",
         f"{_X}; f = {_RFF.format(m=4000)}.fit(X); f.transform(da.zeros((400000, 3), chunks=(200000, 3)))",
         rf"mapping a row chunk of 200000 rows to 4000 features needs about {GB} .*{RLIMIT}: rechunk X"),
    Case("sgd-feature-map", f"{_X}; dxrf.RandomFeatureSGDRegressor({_RFF.format(m=10**10)}).fit(X, y)",
         rf"n_components=10000000000 with 3 input columns .*{RLIMIT}"),
]

# one child answers every Python case: importing dxrf under the limit once
_DRIVER = """
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, dask, dask.array as da
import dxrf, dxrf.io
dask.config.set(scheduler="threads")
out = {}
for name, code in json.loads(sys.argv[1]).items():
    try:
        exec(code)
        out[name] = ["none", ""]
    except BaseException as exc:
        out[name] = [type(exc).__name__, str(exc)]
# a control under the same limit: small requests still run
try:
    X = np.random.default_rng(0).normal(size=(200, 3)); y = X[:, 0]
    dxrf.RandomFeatureRidgeCV(n_components=[20], bandwidths=[1.0], random_state=0).fit(X, y)
    dxrf.io.ingest(sys.argv[2] + '/small.svm', sys.argv[2] + '/ok.zarr')
    # 300000 rows through 2000 features: the prediction's temporaries are one tile of rows at a time
    model = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(2000, bandwidth=1.0, random_state=0)).fit(X, y)
    assert model.predict(np.zeros((300000, 3))).shape == (300000,)
    out["control"] = ["none", ""]
except BaseException as exc:
    out["control"] = [type(exc).__name__, str(exc)]
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def outcomes(inputs) -> dict:
    codes = {c.id: c.code.format(root=inputs) for c in CASES}
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + _DRIVER, json.dumps(codes), str(inputs)],
        capture_output=True, text=True, timeout=300, env=_child_env(), cwd=ROOT,
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, f"the child failed (status {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(line[0][len("RESULT "):])


def test_small_requests_run_under_the_limit(outcomes, inputs):
    """The limit of the child leaves room for real work: the checks do not refuse everything."""
    assert outcomes["control"] == ["none", ""]
    assert (inputs / "ok.zarr" / "zarr.json").is_file()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused_before_allocating(case, outcomes, inputs):
    kind, message = outcomes[case.id]
    assert kind == "ValueError", f"{kind}: {message}"
    assert re.search(case.match, message), message
    if case.dest:
        assert not (inputs / case.dest).exists()
        assert not list(inputs.glob(case.dest + "*")), "a temporary sibling was left behind"


@pytest.mark.parametrize(
    "args, match",
    [
        (["ingest", "{root}/index.svm", "{root}/cli1.zarr"],
         r"feature index 2000000000 at line 2 .* needs about .*RLIMIT_AS"),
        (["ingest", "{root}/wide.csv", "{root}/cli2.zarr", "--target", "y", "--max-levels", "100000"],
         r"'a' \(21000 levels\).* needs about .*RLIMIT_AS.*--drop"),
    ],
    ids=["libsvm-index", "one-hot"],
)
def test_cli_refuses_in_one_line(args, match, inputs):
    args = [a.format(root=inputs) for a in args]
    proc = _run_child(f"import sys\nfrom dxrf.cli.commands import main\nsys.exit(main({args!r}))", timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("dxrf: error: "), proc.stderr
    assert re.search(match, lines[0]), lines[0]
    dest = Path(args[2])
    assert not dest.exists() and not list(dest.parent.glob(dest.name + "*"))


def test_cli_drop_leaves_out_columns(inputs, tmp_path):
    """--drop (the advice of the one-hot refusal) leaves the wide column out."""
    dest = tmp_path / "dropped.zarr"
    proc = _run_child(
        "import sys\nfrom dxrf.cli.commands import main\n"
        f"sys.exit(main(['ingest', '{inputs}/wide.csv', '{dest}', '--target', 'y', '--drop', 'a']))",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    import dxrf.io

    assert list(dxrf.io.open_zarr(dest).columns) == [f"b=z{i}" for i in range(7)]


# -- a scheduler without workers ----------------------------------------------------------------


@pytest.fixture
def empty_scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0") as c:
        yield c.scheduler_address


@pytest.mark.parametrize(
    "how",
    [["--wait-for-workers", "1.5"], "env"],
    ids=["option", "environment"],
)
def test_fit_on_a_scheduler_without_workers_gives_up(how, empty_scheduler, tmp_path):
    import numpy as np

    import dxrf.io

    env = _child_env()
    args = ["--scheduler", empty_scheduler]
    # a real data group: inputs are checked before the scheduler is asked for workers
    rng = np.random.default_rng(0)
    dxrf.io.write_zarr(rng.normal(size=(50, 2)), tmp_path / "data.zarr", y=rng.normal(size=50))
    if how == "env":
        env["DXRF_WAIT_FOR_WORKERS"] = "1.5"
    else:
        args += how
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "dxrf.cli", *args, "fit", str(tmp_path / "data.zarr"), "--out", str(tmp_path / "m")],
        capture_output=True, text=True, timeout=90, env=env, cwd=ROOT,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines == [
        f"dxrf: error: the scheduler at {empty_scheduler} has no workers after waiting 1.5 s: start workers with "
        f"'dask worker {empty_scheduler}' (or check that they can reach it), or wait longer with "
        "--wait-for-workers SECONDS / $DXRF_WAIT_FOR_WORKERS"
    ]
    assert time.monotonic() - start < 60
    assert not (tmp_path / "m").exists()


def test_get_client_waits_a_bounded_time(empty_scheduler):
    import dxrf.cluster

    start = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"the scheduler at {re.escape(empty_scheduler)} has no workers after "
                                           r"waiting 0.5 s"):
        dxrf.cluster.get_client(empty_scheduler, wait_for_workers=0.5)
    assert time.monotonic() - start < 30
    with pytest.raises(TimeoutError, match=r"no workers after waiting 0 s"):
        dxrf.cluster.get_client(empty_scheduler, wait_for_workers=0)


@pytest.mark.parametrize("wait", [-1, "soon", float("nan"), True])
def test_bad_wait_is_refused(wait):
    import dxrf.cluster

    with pytest.raises(ValueError, match=r"wait_for_workers .* must be a number of seconds >= 0"):
        dxrf.cluster.get_client("tcp://127.0.0.1:1", wait_for_workers=wait)


def test_get_client_returns_once_a_worker_joins(make_cluster):
    import dxrf.cluster

    cluster = make_cluster(1)
    client = dxrf.cluster.get_client(cluster.scheduler_address, wait_for_workers=30)
    try:
        assert len(client.scheduler_info()["workers"]) == 1
    finally:
        client.close()


def test_cli_fit_refuses_candidates_the_workers_cannot_hold(make_cluster, tmp_path):
    """On a cluster the per-worker estimate (two partials) is held against the smallest worker's limit."""
    import dxrf.io

    Xd = np.random.default_rng(0).normal(size=(200, 3))
    dxrf.io.write_zarr(Xd, tmp_path / "d.zarr", y=Xd[:, 0], chunk_rows=50)
    cluster = make_cluster(1, memory_limit="1GiB")
    args = ["--scheduler", cluster.scheduler_address, "fit", str(tmp_path / "d.zarr"), "--select", "elss",
            "--n-components", "10", "--n-candidates", "30000", "--bandwidth", "1", "--out", str(tmp_path / "m")]
    proc = _run_child(f"import sys\nfrom dxrf.cli.commands import main\nsys.exit(main({args!r}))", timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert re.search(r"^dxrf: error: n_candidates=30000 \(1 feature map x \d+ row groups? .*\) needs about [\d.,]+ GiB "
                     r"per worker \(two partial results of [\d.,]+ GiB\) but the smallest worker's memory limit is "
                     r"1.00 GiB: use fewer candidates", lines[0]), lines[0]
    assert not (tmp_path / "m").exists()
