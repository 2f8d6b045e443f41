"""Deployment: the docker compose cluster, the notebooks and the CLI on real Dask processes.

Docker is not needed. A real scheduler and two worker processes are started on
loopback with the commands of ``docker-compose.yml`` (host, ports and paths
localised, the executables resolved to this Python), and then:

- every notebook of ``notebooks/`` is executed against them with nbclient, with
  small parameters injected after the cell tagged ``parameters``; the tests
  assert on the JSON summary each notebook prints;
- ``dxrf fit`` and ``dxrf predict`` run with ``--scheduler`` against them;
- the compose file's health checks are run against them;
- the TLS override's Dask configuration brings up a TLS scheduler and worker.

The compose files and the Dockerfile are also checked statically: every command
is a real entry point with real options, the build uses the project's Dockerfile
whose COPY sources exist, the workers have a memory limit and the notebook
server's ``DASK_SCHEDULER_ADDRESS`` points to the scheduler service.
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import fnmatch
import functools
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np
import pytest
import yaml
from dask.utils import parse_bytes
from distributed import Client

import dxrf.io

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_TLS = ROOT / "docker-compose.tls.yml"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WORKER_MEMORY = "1GiB"  # DXRF_WORKER_MEMORY for the loopback workers
START_TIMEOUT = 90


# --------------------------------------------------------------------------- compose files


_VARIABLE = re.compile(r"\$\$|\$\{(?P<braced>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|\$(?P<bare>\w+)")


def interpolate(value: object, env: dict[str, str]) -> object:
    """Compose's variable interpolation (``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$$``)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("bare")
        op, arg, val = m.group("op"), m.group("arg"), env.get(name)
        if op == ":-":
            return val if val else arg
        if op == "-":
            return val if val is not None else arg
        if op in (":?", "?") and not val:
            raise KeyError(f"required variable {name} is not set: {arg}")
        return val or ""

    return _VARIABLE.sub(sub, value)


def _merge_service(base: dict, override: dict) -> dict:
    """Compose's merge of an override file into a service (the rules the files here use)."""
    out = dict(base)
    for key, value in override.items():
        if key == "environment":
            out[key] = {**_env_map(base.get(key)), **_env_map(value)}
        elif key in ("volumes", "ports"):
            merged = {_mount_target(v) if key == "volumes" else v: v for v in base.get(key, [])}
            merged.update({_mount_target(v) if key == "volumes" else v: v for v in value})
            out[key] = list(merged.values())
        else:
            out[key] = value  # command, entrypoint, healthcheck, ...: replaced
    return out


def _env_map(env: object) -> dict:
    if env is None:
        return {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return dict(env)


def _mount_target(volume: str) -> str:
    return volume.split(":")[1]


def load_compose(*paths: Path, env: dict[str, str] | None = None) -> dict:
    """The compose model of ``paths`` (later files override earlier ones), interpolated with ``env``."""
    env = {} if env is None else env
    model: dict = {"services": {}, "volumes": {}}
    for path in paths:
        doc = yaml.safe_load(path.read_text())
        for name, svc in doc.get("services", {}).items():
            # each file is interpolated, then merged
            model["services"][name] = _merge_service(model["services"].get(name, {}), interpolate(svc, env))
        model["volumes"].update(doc.get("volumes") or {})
    for svc in model["services"].values():
        svc["environment"] = _env_map(svc.get("environment"))
    return model


def argv_of(service: dict) -> list[str]:
    entry = service.get("entrypoint") or []
    command = service.get("command") or []
    entry = shlex.split(entry) if isinstance(entry, str) else list(entry)
    command = shlex.split(command) if isinstance(command, str) else list(command)
    return [str(a) for a in entry + command]


def option(argv: list[str], name: str) -> str | None:
    """Value of ``--name value`` or ``--name=value`` in argv."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def set_option(argv: list[str], name: str, value: str) -> list[str]:
    out, i, found = [], 0, False
    while i < len(argv):
        if argv[i] == name:
            out += [name, value]
            i += 2
            found = True
            continue
        if argv[i].startswith(name + "="):
            out.append(f"{name}={value}")
            found = True
        else:
            out.append(argv[i])
        i += 1
    return out if found else out + [name, value]


def local_argv(argv: list[str]) -> list[str]:
    """A compose command with its executable resolved to this Python (same environment)."""
    exe, *rest = argv
    modules = {"dask": "dask", "dxrf": "dxrf.cli"}
    if exe in modules:
        return [sys.executable, "-m", modules[exe], *rest]
    if exe == "python":
        return [sys.executable, *rest]
    raise AssertionError(f"no local equivalent of {exe!r}")


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


@functools.cache
def compose() -> dict:
    return load_compose(COMPOSE)


@functools.cache
def compose_tls() -> dict:
    return load_compose(COMPOSE, COMPOSE_TLS)


@functools.cache
def dask_help(subcommand: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "dask", subcommand, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# --------------------------------------------------------------------------- processes


class Process:
    """A subprocess in its own process group (a nanny and its worker die together)."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, cwd: Path | None = None):
        self.argv = argv
        self.log = log
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def stop(self) -> None:
        pgid = self.popen.pid  # start_new_session: the group is led by the process we started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # the group's leftovers, if any
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)


@dataclass
class LoopbackCluster:
    address: str
    dashboard_port: int
    workers: dict
    processes: list[Process]
    tmp: Path
    client: Client | None = None
    env: dict = field(default_factory=dict)

    def logs(self) -> str:
        return "\n".join(f"--- {p.argv[3:5]} ---\n{p.tail(1500)}" for p in self.processes)


# settings that only make sense inside the containers (the address is passed explicitly;
# the dashboard link names the port published on the docker host)
_CONTAINER_ONLY = {"DASK_SCHEDULER_ADDRESS", "DASK_DISTRIBUTED__DASHBOARD__LINK"}


def _dask_env(service_env: dict, replace: dict[str, str]) -> dict[str, str]:
    """This machine's environment plus the service's Dask configuration (with paths and addresses localised)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    for key, value in service_env.items():
        if key.startswith("DASK_") and key not in _CONTAINER_ONLY and value is not None:
            for old, new in replace.items():
                value = value.replace(old, new)
            env[key] = value
    return env


def start_cluster(model: dict, tmp: Path, n_workers: int, replace: dict[str, str] | None = None) -> LoopbackCluster:
    """Start the compose file's scheduler and ``n_workers`` workers on loopback."""
    replace = dict(replace or {})
    tmp.mkdir(parents=True, exist_ok=True)
    services = model["services"]
    cluster = LoopbackCluster("", 0, {}, [], tmp)
    try:
        sched = argv_of(services["scheduler"])
        sched = set_option(sched, "--host", "127.0.0.1")
        sched = set_option(sched, "--port", "0")
        sched = set_option(sched, "--dashboard-address", "127.0.0.1:0")
        sched = set_option(sched, "--scheduler-file", str(tmp / "scheduler.json"))
        env = _dask_env(services["scheduler"]["environment"], replace)
        cluster.processes.append(Process(local_argv(sched), env, tmp / "scheduler.log", cwd=tmp))
        deadline = time.monotonic() + START_TIMEOUT
        while not (tmp / "scheduler.json").exists():
            assert cluster.processes[0].alive(), f"the scheduler exited:\n{cluster.processes[0].tail()}"
            assert time.monotonic() < deadline, f"no scheduler file after {START_TIMEOUT} s:\n{cluster.processes[0].tail()}"
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written in one go, but be safe
        info = json.loads((tmp / "scheduler.json").read_text())
        cluster.address = info["address"]
        cluster.dashboard_port = int(info["services"]["dashboard"])

        worker_argv = argv_of(services["worker"])
        compose_address = worker_argv[2]
        replace[compose_address] = cluster.address
        for i in range(n_workers):
            argv = [replace.get(a, a) for a in worker_argv]
            argv = set_option(argv, "--dashboard-address", "127.0.0.1:0")
            argv = set_option(argv, "--local-directory", str(tmp / f"worker-{i}"))
            argv = set_option(argv, "--host", "127.0.0.1")
            env = _dask_env(services["worker"]["environment"], replace)
            cluster.processes.append(Process(local_argv(argv), env, tmp / f"worker-{i}.log", cwd=tmp))
        cluster.env = _dask_env(services["notebook"]["environment"], replace)
        return cluster
    except BaseException:
        for p in reversed(cluster.processes):
            p.stop()
        raise


def stop_cluster(cluster: LoopbackCluster) -> None:
    if cluster.client is not None:
        with contextlib.suppress(Exception):
            cluster.client.close(timeout=10)
    for p in reversed(cluster.processes):  # workers first, then the scheduler
        p.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    env = {"DXRF_WORKER_MEMORY": WORKER_MEMORY}
    model = load_compose(COMPOSE, env=env)
    c = start_cluster(model, tmp_path_factory.mktemp("cluster"), n_workers=2)
    try:
        c.client = Client(c.address, timeout=30, set_as_default=False)
        c.client.wait_for_workers(2, timeout=START_TIMEOUT)
        c.workers = c.client.scheduler_info()["workers"]
        yield c
    except BaseException:
        print(c.logs(), file=sys.stderr)
        raise
    finally:
        stop_cluster(c)


# --------------------------------------------------------------------------- notebooks


def _parameter_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def parameter_values(path: Path) -> dict:
    """The literal values assigned in a notebook's cell tagged ``parameters``."""
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError):
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def inject_parameters(nb: nbformat.NotebookNode, params: dict) -> None:
    """Papermill's convention: a cell tagged ``injected-parameters`` after the one tagged ``parameters``."""
    cells = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    unknown = set(params) - _parameter_names(nb.cells[cells[0]].source)
    assert not unknown, f"parameters {sorted(unknown)} are not in the parameters cell"
    source = "# injected by the tests\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
    nb.cells.insert(cells[0] + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    """A kernel spec running this very Python (not whatever ``python3`` is first on PATH)."""
    from ipykernel.kernelspec import write_kernel_spec

    base = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(path=base / "dxrf-test")
    spec = json.loads((base / "dxrf-test" / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    return base


def execute_notebook(path: Path, params: dict, env: dict, cwd: Path, kernel_dir: Path, timeout: int = 300):
    """Execute a notebook; return it (with outputs) and the JSON summary it printed last."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    inject_parameters(nb, params)
    km = KernelManager(
        kernel_name="dxrf-test",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)], ensure_native_kernel=False),
    )
    client = NotebookClient(nb, km=km, timeout=timeout, resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{str(exc)[-4000:]}")
    return nb, notebook_summary(nb, path.stem)


def notebook_summary(nb: nbformat.NotebookNode, name: str) -> dict:
    """The JSON summary an executed notebook printed last (a line with a ``notebook`` key)."""
    summary = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                for line in out["text"].splitlines():
                    if line.startswith("{"):
                        with contextlib.suppress(ValueError):
                            doc = json.loads(line)
                            if isinstance(doc, dict) and "notebook" in doc:
                                summary = doc
    assert summary is not None, f"{name} printed no JSON summary"
    assert summary["notebook"] == name
    return summary


def n_images(nb) -> int:
    return sum(
        "image/png" in out.get("data", {})
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") in ("display_data", "execute_result")
    )


def kernel_env(scheduler: str | None, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "DXRF_WORK_DIR", "DASK_SCHEDULER_ADDRESS")}
    env.update(extra or {})
    if scheduler is not None:
        env["DASK_SCHEDULER_ADDRESS"] = scheduler
    return env


SMALL = {
    "01-quickstart": {"N_ROWS": 3000, "M": 40, "M0": 200, "CHUNK_ROWS": 1000},
    "02-leverage-scores": {"N_ROWS": 3000, "M0": 200, "M": 20, "REPEATS": 3, "CHUNK_ROWS": 1000},
    # DATA_BYTES None: twice the 1 GiB workers' limit, cut by the cap to 4 MB
    "03-out-of-core": {"DATA_BYTES": None, "MAX_DATA_BYTES": 4_000_000, "N_FEATURES": 16, "CHUNK_ROWS": 8192, "M0": 200},
}


def test_every_notebook_has_small_parameters():
    assert [p.stem for p in NOTEBOOKS] == sorted(SMALL)


def test_committed_notebooks_have_no_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name} cell {i} has outputs: strip them before committing"
                assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"
        assert "widgets" not in nb.metadata, f"{path.name} carries widget state"


def _check_quickstart(s: dict, work: Path, params: dict, is_file=lambda p: Path(p).is_file()) -> None:
    assert s["n_train"] == params["N_ROWS"] and s["n_test"] == params["N_ROWS"]
    assert s["n_columns"] > 90  # one-hot encoded Adult: 6 numeric + ~99 levels
    assert 0 < s["dof"] < params["M0"]
    assert s["n_passes"] == 2  # the median bandwidth's row sample + the one statistics pass
    grids = parameter_values(ROOT / "notebooks" / "01-quickstart.ipynb")  # the grids the tests keep
    methods = s["methods"]
    assert methods == grids["METHODS"] and {"none", "elss-sample", "elss-top"} <= set(methods)
    # every method has its own penalties, chosen on the validation rows from the notebook's grids
    for m in methods:
        assert s["alpha"][m] in grids["ALPHAS"]
        assert (s["lam"][m] is None) is (m == "none")
        assert s["lam"][m] is None or s["lam"][m] in grids["LAMS"]
        assert -1 < s["validation_r2"][m] < 1
    # every model beats the majority class, by a margin, on the real test file
    assert 0.7 < s["majority_rate"] < 0.8
    accuracy = s["test_accuracy"]
    assert set(accuracy) == set(methods)
    for m in methods:
        assert accuracy[m] > s["majority_rate"] + 0.01, m
    # the winner and the sentence saying so follow from the numbers
    best = max(accuracy.values())
    winners = [m for m in methods if accuracy[m] == best]
    assert s["winner"] == (winners[0] if len(winners) == 1 else "tie")
    assert f"{best:.4f}" in s["verdict"]
    assert ("won on adult.test" in s["verdict"]) is (len(winners) == 1)
    assert is_file(s["figure"]) and Path(s["figure"]).is_relative_to(work)


def _check_leverage(s: dict, work: Path, params: dict) -> None:
    assert s["n_train"] + s["n_test"] == params["N_ROWS"]
    dof = np.array(s["dof"])
    assert np.all(np.diff(dof) <= 1e-9) and np.all(dof > 0) and np.all(dof <= params["M0"])
    assert dof[0] > 5 * dof[-1]  # the grid spans a real change of d_lambda
    assert np.allclose(s["weights_sum"], 1.0)
    assert max(s["weight_spread"]) > 0.1  # leverage weights are not uniform
    for method in ("sample", "top"):
        test = np.array(s["test_mse"][method])
        assert np.all(np.isfinite(test)) and np.all(np.isfinite(s["train_mse"][method]))
        assert test.min() < 0.9 * s["test_variance"]  # better than predicting the mean
    for name in ("02-weights.png", "02-dof.png", "02-error-vs-lambda.png"):
        assert (work / "results" / name).is_file()


def _check_out_of_core(s: dict, work: Path, params: dict) -> None:
    cap = params["MAX_DATA_BYTES"]
    limit = s["worker_memory_limit"]
    requested = params["DATA_BYTES"] or 2 * limit
    assert s["max_data_bytes"] == cap and s["requested_bytes"] == requested
    assert s["capped"] is (requested > cap)
    row_bytes = 4 * (params["N_FEATURES"] + 1)  # X and y, float32
    n_rows = min(requested, cap) // row_bytes
    assert s["n_rows"] == s["rows_seen"] == n_rows
    # what is written stays within the cap, before compression and on disk (zarr metadata: a few kB)
    assert s["data_bytes"] == n_rows * row_bytes <= cap
    assert 0.5 * s["data_bytes"] < s["bytes_on_disk"] <= s["data_bytes"] + 64 * 1024
    # out of core exactly when the data exceed the smallest worker's limit, and the notebook says which
    assert s["out_of_core"] is (s["data_bytes"] > limit)
    assert ("NOT out of core" in s["size_note"]) is (not s["out_of_core"])
    if s["capped"] and not s["out_of_core"]:
        assert "MAX_DATA_BYTES" in s["size_note"]
    assert s["n_chunks"] == math.ceil(n_rows / params["CHUNK_ROWS"])
    assert s["workers_unchanged"] is True
    assert s["validation_r2"] > 0.5
    assert s["dashboard_link"].startswith("http")
    assert not (work / "zarr" / "synthetic-out-of-core.zarr").exists()  # KEEP_DATA=False cleans up


CHECKS = {"01-quickstart": _check_quickstart, "02-leverage-scores": _check_leverage, "03-out-of-core": _check_out_of_core}
MIN_IMAGES = {"01-quickstart": 1, "02-leverage-scores": 3, "03-out-of-core": 0}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_against_the_scheduler(path, cluster, kernel_dir, tmp_path):
    work = tmp_path / "work"
    params = {**SMALL[path.stem], "WORK_DIR": str(work)}
    nb, s = execute_notebook(path, params, kernel_env(cluster.address, cluster.env), tmp_path, kernel_dir)
    assert s["scheduler"] == cluster.address  # attached through DASK_SCHEDULER_ADDRESS
    if "n_workers" in s:
        assert s["n_workers"] == 2
    if path.stem == "03-out-of-core":
        assert s["dashboard_link"] == f"http://127.0.0.1:{cluster.dashboard_port}/status"
        assert s["worker_memory_limit"] == parse_bytes(WORKER_MEMORY)
        assert s["capped"] is True and s["out_of_core"] is False  # twice 1 GiB, cut to 4 MB by the cap
    CHECKS[path.stem](s, work, SMALL[path.stem])
    assert n_images(nb) >= MIN_IMAGES[path.stem]


def test_notebook_starts_a_local_cluster_without_a_scheduler_address(cluster, kernel_dir, tmp_path):
    path = ROOT / "notebooks" / "03-out-of-core.ipynb"
    work = tmp_path / "work"
    # an explicit size under the cap: not capped; the embedded worker's limit is large, so not out of core either
    small = {**SMALL["03-out-of-core"], "DATA_BYTES": 3_000_000}
    params = {**small, "WORK_DIR": str(work), "N_WORKERS": 1}
    _, s = execute_notebook(path, params, kernel_env(None), tmp_path, kernel_dir)
    assert s["scheduler"] != cluster.address and s["scheduler"].startswith("tcp://127.0.0.1:")
    assert s["n_workers"] == 1
    assert s["capped"] is False and s["out_of_core"] is False
    _check_out_of_core(s, work, small)


# --------------------------------------------------------------------------- the CLI on the cluster


def _clients_seen(client: Client) -> int:
    return sum(1 for _, msg in client.get_events("all") if isinstance(msg, dict) and msg.get("action") == "add-client")


def run_dxrf(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}  # --scheduler alone says where
    return subprocess.run(
        local_argv(["dxrf", *args]), capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False
    )


def test_dxrf_fit_and_predict_with_scheduler(cluster, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 5))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=4000)
    data = tmp_path / "data.zarr"
    dxrf.io.write_zarr(X, data, y=y, chunk_rows=500)
    before = _clients_seen(cluster.client)

    fit = run_dxrf(
        "fit", str(data), "--select", "elss", "--n-components", "60", "--n-candidates", "300",
        "--alphas", "1e-6,1e-4,1e-2", "--standardize", "--scale-y",
        "--scheduler", cluster.address, "--out", str(tmp_path / "model"),
    )
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert "saved:" in fit.stdout and "<- chosen" in fit.stdout
    pred = run_dxrf("predict", str(tmp_path / "model"), str(data), "--out", str(tmp_path / "pred.zarr"),
                    "--scheduler", cluster.address)
    assert pred.returncode == 0, pred.stderr[-3000:]
    assert "wrote 4000 predictions" in pred.stdout

    assert _clients_seen(cluster.client) >= before + 2  # both commands attached to this scheduler
    import zarr

    y_pred = np.asarray(zarr.open_group(str(tmp_path / "pred.zarr"), mode="r")["y_pred"][:]).reshape(-1)
    assert y_pred.shape == (4000,)
    r2 = 1 - np.mean((y_pred - y) ** 2) / np.var(y)
    assert r2 > 0.9, r2


# --------------------------------------------------------------------------- health checks


def _healthcheck_code(service: dict) -> str:
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python" and test[2] == "-c", test
    return test[3]


def test_compose_health_checks_pass_on_the_running_cluster(cluster):
    services = compose()["services"]
    sched_port = port_of(option(argv_of(services["scheduler"]), "--dashboard-address"))
    code = _healthcheck_code(services["scheduler"]).replace(f":{sched_port}/", f":{cluster.dashboard_port}/")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr

    worker_port = port_of(option(argv_of(services["worker"]), "--dashboard-address"))
    for info in cluster.workers.values():
        port = info["services"]["dashboard"]
        code = _healthcheck_code(services["worker"]).replace(f":{worker_port}/", f":{port}/")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode == 0, proc.stderr
    # and a check against a port where nothing listens fails
    dead = _healthcheck_code(services["scheduler"]).replace(f":{sched_port}/", ":9/")
    assert subprocess.run([sys.executable, "-c", dead], capture_output=True, timeout=30, check=False).returncode != 0


def test_loopback_workers_have_the_compose_settings(cluster):
    assert len(cluster.workers) == 2
    for info in cluster.workers.values():
        assert info["nthreads"] == 1
        assert info["memory_limit"] == parse_bytes(WORKER_MEMORY)  # ${DXRF_WORKER_MEMORY} interpolated


# --------------------------------------------------------------------------- static checks of the compose files


def test_compose_services_volume_and_single_image():
    services = compose()["services"]
    assert {"scheduler", "worker", "notebook"} <= set(services)
    builds = {json.dumps(s.get("build"), sort_keys=True) for s in services.values()}
    images = {s.get("image") for s in services.values()}
    assert len(builds) == 1 and len(images) == 1, "every service runs the one image built from the Dockerfile"
    build = services["scheduler"]["build"]
    context = ROOT / build["context"]
    assert context.resolve() == ROOT
    assert (context / build.get("dockerfile", "Dockerfile")).resolve() == (ROOT / "Dockerfile")

    # one named volume for zarr data and results, at the same path everywhere
    (volume,) = compose()["volumes"]
    mounts = {name: {v.split(":")[0]: _mount_target(v) for v in s["volumes"]} for name, s in services.items()}
    for name in ("scheduler", "worker", "notebook"):
        assert mounts[name].get(volume) == "/work", (name, mounts[name])
        env = services[name]["environment"]
        assert env["DXRF_WORK_DIR"] == "/work"
        assert env["DXRF_DATA_DIR"] in mounts[name].values()  # the data sets are mounted where dxrf looks
    # clients write temporary zarr data (workflows use tempfile) where the workers can read it,
    # in a folder the image creates on the volume
    mkdirs = " ".join(rest for word, rest in dockerfile_instructions() if word == "RUN" and "mkdir" in rest)
    for name in ("notebook", "cli"):
        tmpdir = services[name]["environment"]["TMPDIR"]
        assert tmpdir.startswith("/work/") and tmpdir in mkdirs, (name, tmpdir)


def test_compose_scheduler_worker_and_notebook_settings():
    services = compose()["services"]
    sched = argv_of(services["scheduler"])
    assert sched[:2] == ["dask", "scheduler"]
    port = int(option(sched, "--port"))
    dashboard = port_of(option(sched, "--dashboard-address"))
    published = {str(p).rsplit(":", 1)[-1] for p in services["scheduler"]["ports"]}
    assert str(dashboard) in published and str(port) in published
    assert f":{dashboard}/health" in _healthcheck_code(services["scheduler"])

    address = f"tcp://scheduler:{port}"
    worker = services["worker"]
    wargv = argv_of(worker)
    assert wargv[:3] == ["dask", "worker", address]
    assert option(wargv, "--nthreads") == "1"
    assert parse_bytes(option(wargv, "--memory-limit")) == parse_bytes("4GiB")  # the default
    raw = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]["command"]
    assert "${DXRF_WORKER_MEMORY:-" in " ".join(raw)  # ... taken from an environment variable
    cap = worker["deploy"]["resources"]["limits"]["memory"]
    assert parse_bytes(cap) > parse_bytes(option(wargv, "--memory-limit"))  # Dask acts before the kernel's OOM killer
    assert worker["restart"] in ("on-failure", "unless-stopped", "always")
    assert f":{port_of(option(wargv, '--dashboard-address'))}/health" in _healthcheck_code(worker)
    assert "ports" not in worker  # so that --scale worker=N does not clash on host ports
    assert worker["depends_on"]["scheduler"]["condition"] == "service_healthy"

    notebook = services["notebook"]
    assert notebook["environment"]["DASK_SCHEDULER_ADDRESS"] == address
    assert argv_of(notebook)[:2] == ["jupyter", "lab"]
    assert option(argv_of(notebook), "--ServerApp.root_dir") == "/work"
    assert notebook["environment"]["DASK_DISTRIBUTED__DASHBOARD__LINK"] == f"http://localhost:{dashboard}/status"
    for svc in services.values():
        assert svc["environment"]["DASK_SCHEDULER_ADDRESS"] == address


def _check_entry_point(argv: list[str], capsys) -> None:
    exe = argv[0]
    if exe == "dask":
        sub = argv[1]
        assert sub in ("scheduler", "worker"), argv
        help_text = dask_help(sub)
        for arg in argv[2:]:
            if arg.startswith("--"):
                assert re.search(rf"^\s+{re.escape(arg.split('=')[0])}\b", help_text, re.MULTILINE), f"`dask {sub}` has no {arg}"
    elif exe == "dxrf":
        from dxrf.cli.commands import build_parser

        project = tomllib.loads((ROOT / "pyproject.toml").read_text())
        assert project["project"]["scripts"]["dxrf"] == "dxrf.cli:main"
        if "--help" in argv or "-h" in argv:
            with pytest.raises(SystemExit) as exc:
                build_parser().parse_args(argv[1:])
            assert exc.value.code == 0
            assert "usage: dxrf" in capsys.readouterr().out
        else:
            build_parser().parse_args(argv[1:])
    elif exe == "jupyter":
        assert argv[1] == "lab", argv  # jupyterlab's `jupyter lab`, installed in the image
        assert "jupyterlab" in dockerfile_pip_install(), "the Dockerfile must install jupyterlab"
        for arg in argv[2:]:
            assert re.fullmatch(r"--(ip|port|no-browser|allow-root|ServerApp\.\w+|IdentityProvider\.\w+)(=.*)?", arg), arg
    elif exe == "python":
        assert argv[1] == "-c"
        compile(argv[2], "<healthcheck>", "exec")
    else:
        raise AssertionError(f"{argv}: not a dask, dxrf, jupyter or python entry point")


@pytest.mark.parametrize("variant", ["plain", "tls"])
def test_compose_commands_are_real_entry_points(variant, capsys):
    model = compose() if variant == "plain" else compose_tls()
    for name, svc in model["services"].items():
        _check_entry_point(argv_of(svc), capsys)
        if "healthcheck" in svc:
            test = svc["healthcheck"]["test"]
            assert test[0] == "CMD", (name, test)
            _check_entry_point(test[1:], capsys)


# --------------------------------------------------------------------------- the Dockerfile


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerfile_pip_install() -> str:
    runs = [rest for word, rest in dockerfile_instructions() if word == "RUN" and "pip install" in rest]
    assert runs, "the Dockerfile installs nothing with pip"
    return " ".join(runs)


def test_dockerfile_builds_the_project_on_python_311():
    instructions = dockerfile_instructions()
    # the base is a build argument whose public default is the official Python 3.11 image
    assert instructions[:2] == [("ARG", "BASE_IMAGE=python:3.11-slim"), ("FROM", "${BASE_IMAGE}")]
    ignore = [p.strip().rstrip("/") for p in (ROOT / ".dockerignore").read_text().splitlines()
              if p.strip() and not p.startswith("#")] if (ROOT / ".dockerignore").exists() else []
    copied = []
    for word, rest in instructions:
        if word != "COPY":
            continue
        args = [a for a in shlex.split(rest) if not a.startswith("--")]
        assert "--from" not in rest
        for src in args[:-1]:
            matches = list(ROOT.glob(src.rstrip("/"))) if any(c in src for c in "*?[") else [ROOT / src]
            assert matches and all(m.exists() for m in matches), f"COPY source {src!r} does not exist"
            for m in matches:
                rel = m.relative_to(ROOT).as_posix()
                assert not any(fnmatch.fnmatch(rel, pat) for pat in ignore), f"{rel} is excluded by .dockerignore"
            copied.append(src.rstrip("/").lstrip("./"))
    # what `pip install .` needs: the build configuration, the readme it names, the packages
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", project["project"]["readme"], "dxrf", *project["tool"]["setuptools"]["package-dir"].values()}
    assert needed <= set(copied), needed - set(copied)
    assert "notebooks" in copied
    pip = shlex.split(dockerfile_pip_install())
    assert "." in pip, "the image installs the project with `pip install .`"
    for package in ("jupyterlab", "nbclient", "bokeh"):
        assert any(a.split(">")[0].split("=")[0] == package for a in pip), f"the image does not install {package}"


def test_offline_wheels_are_optional_and_exclusive():
    """``WHEELS`` empty: pip uses its index; set: only deploy/wheels/, never the index."""
    instructions = dockerfile_instructions()
    assert ("ARG", "WHEELS=") in instructions
    assert ("COPY", "deploy/wheels/ /tmp/wheels/") in instructions
    assert "pip install ${WHEELS:+--no-index --find-links /tmp/wheels} ." in " ".join(dockerfile_pip_install().split())
    assert (ROOT / "deploy" / "wheels" / ".gitignore").is_file()  # the COPY source exists in a clean clone
    for package in ("bokeh", "jupyterlab", "nbclient", "ipykernel", "setuptools"):
        assert package in (ROOT / "deploy" / "build-local-images.sh").read_text()


def test_pyproject_installs_every_package():
    """A package missing from the list imports from a checkout but not from an installed wheel."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(project["packages"])
    dirs = {project["package-dir"].get(p, p.replace(".", "/")) for p in listed}
    on_disk = {init.parent.relative_to(ROOT).as_posix() for top in ("dxrf", "workflows")
               for init in (ROOT / top).rglob("__init__.py")}
    assert on_disk == dirs, f"not listed: {sorted(on_disk - dirs)}; not on disk: {sorted(dirs - on_disk)}"


# --------------------------------------------------------------------------- TLS


def test_tls_override_is_dask_security_configuration():
    import dask.config

    base, tls = compose()["services"], compose_tls()["services"]
    port = int(option(argv_of(base["scheduler"]), "--port"))
    for name, svc in tls.items():
        env = svc["environment"]
        assert env["DASK_SCHEDULER_ADDRESS"] == f"tls://scheduler:{port}", name
        assert "/certs:ro" in " ".join(svc["volumes"]), name
        dask_keys = {k: v for k, v in env.items() if k.startswith("DASK_DISTRIBUTED__")}
        config = dask.config.collect_env(dask_keys)
        defaults = dask.config.get("distributed")
        for key, value in dask_keys.items():
            path = [p.lower() for p in key.removeprefix("DASK_").split("__")]
            node = defaults
            for part in path[1:]:
                keys = {k.replace("-", "_"): k for k in node}
                assert part in keys, f"{key}: no Dask setting {'.'.join(path)}"
                node = node[keys[part]]
            if value.startswith("/certs/"):
                assert value.rsplit("/", 1)[1] in ("ca.pem", "dask.pem", "dask.key")
        assert config["distributed"]["comm"]["require_encryption"] is True, name
    sched, worker = argv_of(tls["scheduler"]), argv_of(tls["worker"])
    assert option(sched, "--protocol") == "tls"
    # the TLS commands are the plain ones, over tls://
    assert [a for a in sched if a not in ("--protocol", "tls")] == argv_of(base["scheduler"])
    assert [a.replace("tls://", "tcp://") for a in worker] == argv_of(base["worker"])


def _make_certificates(directory: Path) -> None:
    """A CA and one certificate signed by it (what the TLS override expects in /certs)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=2))

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dxrf test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(validity[0]).not_valid_after(validity[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dask")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(validity[0]).not_valid_after(validity[1])
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.DNSName("scheduler")]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "dask.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "dask.key").write_bytes(pem_key(key))


def test_tls_override_brings_up_a_tls_cluster(tmp_path):
    """The override's commands and Dask configuration, on loopback: a TLS scheduler, a worker, a pass."""
    certs = tmp_path / "certs"
    _make_certificates(certs)
    model = load_compose(COMPOSE, COMPOSE_TLS, env={"DXRF_WORKER_MEMORY": WORKER_MEMORY})
    c = start_cluster(model, tmp_path / "cluster", n_workers=1, replace={"/certs/": f"{certs}/"})
    try:
        assert c.address.startswith("tls://127.0.0.1:")
        script = (
            "import json, numpy as np, dask.array as da, dxrf\n"
            "from dxrf.cluster import get_client\n"
            "client = get_client()\n"  # DASK_SCHEDULER_ADDRESS + the TLS configuration of the environment
            "client.wait_for_workers(1, timeout=60)\n"
            "X = da.from_array(np.random.default_rng(0).normal(size=(2000, 3)), chunks=500)\n"
            "s = dxrf.accumulate(X, features=dxrf.RandomFourierFeatures(20, random_state=0))\n"
            "print(json.dumps({'address': client.scheduler.address, 'n': s.n,\n"
            "                  'workers': list(client.scheduler_info()['workers'])}))\n"
            "client.close()\n"
        )
        env = kernel_env(c.address, c.env)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp_path, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:] + c.logs()
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["address"] == c.address and out["n"] == 2000
        assert len(out["workers"]) == 1 and out["workers"][0].startswith("tls://")
    finally:
        stop_cluster(c)
