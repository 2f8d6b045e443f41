"""The docker compose stack, built and run for real (``pytest -m docker``; needs root on Debian).

``deploy/build-local-images.sh`` installs docker and docker-compose when missing, starts
dockerd, builds a Debian base image with debootstrap and ``dxrf:latest`` from the project's
Dockerfile with wheels built on this machine: no container registry is involved. Then
``docker-compose.host.yml`` (docker-compose.yml on the host's network, written from it by
``deploy/compose_host.py``) is brought up (scheduler, two workers, Jupyter Lab) under a project
name of its own, listening on 127.0.0.1 at free ports, so that every connection, the host's
and the containers', is on loopback; and:

- every container's health check must report healthy, and the scheduler's dashboard must
  answer on its loopback port;
- every container is on the host's network with no port bindings and no network of the
  project exists; every socket of every process in the containers listens on, or connects
  to, 127.0.0.1, and the scheduler listens on its port there;
- ``dxrf reproduce quickstart`` runs through the ``cli`` service against the scheduler;
- a notebook is executed inside the ``notebook`` service (``jupyter execute``) against it;
- the health checks still pass after the work.

Everything is taken down with ``down -v`` (containers, volume) whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from dask.utils import parse_bytes
from distributed import Client
from distributed.versions import VersionMismatchWarning

from test_cluster_deploy import SMALL, _check_quickstart, _clients_seen, inject_parameters, notebook_summary
from test_compose_host import LOOPBACK, free_port, listening, not_on_loopback

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "deploy" / "build-local-images.sh"
COMPOSE_FILE = ROOT / "docker-compose.host.yml"
BUILD_TIMEOUT = 40 * 60  # a cold build: apt, debootstrap, wheels, image
HEALTHY_TIMEOUT = 240
WORKER_MEMORY = "1GiB"
WORKER_CONTAINER_MEMORY = "2g"  # docker's units: 2 GiB


@dataclass
class Stack:
    project: str
    env: dict
    scheduler_port: int
    dashboard_port: int
    notebook_port: int

    @property
    def scheduler(self) -> str:
        return f"tcp://{LOOPBACK}:{self.scheduler_port}"

    def compose(self, *args: str, timeout: int = 600, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker-compose", "--project-name", self.project, "--file", str(COMPOSE_FILE), *args],
            capture_output=True, text=True, timeout=timeout, env=self.env, cwd=ROOT, input=input, check=False,
        )

    def containers(self, service: str) -> list[str]:
        proc = self.compose("ps", "-q", service, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    def inspect(self, container: str, field: str) -> object:
        proc = subprocess.run(["docker", "inspect", "--format", f"{{{{json {field}}}}}", container],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def health(self, container: str) -> dict:
        return self.inspect(container, ".State.Health")

    def pids(self) -> list[int]:
        """The host's process ids of every process in the stack's containers."""
        out = []
        for svc in SERVICES:
            for container in self.containers(svc):
                proc = subprocess.run(["docker", "top", container, "-eo", "pid"], capture_output=True, text=True,
                                      timeout=60, check=False)
                assert proc.returncode == 0, proc.stderr
                out += [int(line) for line in proc.stdout.split()[1:]]
        return out

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=120).stdout[-6000:]


SERVICES = {"scheduler": 1, "worker": 2, "notebook": 1}


@pytest.fixture(scope="module")
def stack():
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.fail("the docker tests install and start docker: they need root on a Debian machine")
    build = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                           check=False)
    assert build.returncode == 0, f"building the images failed:\n{build.stderr[-6000:]}"

    ports = {name: free_port() for name in ("DXRF_SCHEDULER_PORT", "DXRF_DASHBOARD_PORT", "DXRF_NOTEBOOK_PORT")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DXRF_", "DASK_", "COMPOSE_"))}
    env.update({k: str(v) for k, v in ports.items()})
    env.update(DXRF_WORKER_MEMORY=WORKER_MEMORY,
               DXRF_WORKER_CONTAINER_MEMORY=WORKER_CONTAINER_MEMORY)
    s = Stack(f"dxrftest{os.getpid()}", env, ports["DXRF_SCHEDULER_PORT"], ports["DXRF_DASHBOARD_PORT"],
              ports["DXRF_NOTEBOOK_PORT"])
    try:
        up = s.compose("up", "--detach", "--no-build", "--scale", "worker=2", *SERVICES)
        assert up.returncode == 0, up.stderr[-4000:]
        deadline = time.monotonic() + HEALTHY_TIMEOUT
        while True:
            states = {c: s.health(c)["Status"] for svc in SERVICES for c in s.containers(svc)}
            if len(states) == sum(SERVICES.values()) and set(states.values()) == {"healthy"}:
                break
            assert "unhealthy" not in states.values(), f"{states}\n{s.logs()}"
            assert time.monotonic() < deadline, f"not healthy after {HEALTHY_TIMEOUT} s: {states}\n{s.logs()}"
            time.sleep(3)
        yield s
    finally:
        down = s.compose("down", "--volumes", "--remove-orphans", "--timeout", "20")
        assert down.returncode == 0, down.stderr[-2000:]


@pytest.fixture(scope="module")
def client(stack):
    # the host reaches the scheduler and the workers on loopback, as the containers do;
    # the image's Python is Debian's 3.11 patch level, maybe not this one's: no warning for that
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mismatched versions found", VersionMismatchWarning)
        c = Client(stack.scheduler, timeout=30, set_as_default=False)
    with c:
        yield c


def test_stack_is_healthy_on_loopback(stack, client):
    with urllib.request.urlopen(f"http://{LOOPBACK}:{stack.dashboard_port}/health", timeout=10) as r:
        assert r.read() == b"ok"
    info = client.scheduler_info()
    assert info["address"] == stack.scheduler
    assert len(info["workers"]) == 2
    for address, worker in info["workers"].items():
        assert address.startswith(f"tcp://{LOOPBACK}:") and worker["nanny"].startswith(f"tcp://{LOOPBACK}:")
        assert worker["nthreads"] == 1 and worker["memory_limit"] == parse_bytes(WORKER_MEMORY)
    # the compose file's hard cap of each worker container, from deploy.resources.limits
    for container in stack.containers("worker"):
        proc = subprocess.run(["docker", "inspect", "--format", "{{.HostConfig.Memory}}", container],
                              capture_output=True, text=True, timeout=60, check=True)
        assert int(proc.stdout) == 2 * 2**30


def test_every_connection_is_on_loopback(stack, client):
    for svc in SERVICES:
        for container in stack.containers(svc):
            assert stack.inspect(container, ".HostConfig.NetworkMode") == "host", svc
            assert not stack.inspect(container, ".HostConfig.PortBindings"), svc
    networks = subprocess.run(["docker", "network", "ls", "-q", "--filter",
                               f"label=com.docker.compose.project={stack.project}"],
                              capture_output=True, text=True, timeout=60, check=True)
    assert networks.stdout.split() == []
    pids = stack.pids()
    assert len(pids) >= sum(SERVICES.values())
    assert not_on_loopback(pids) == []
    sockets = listening(pids)
    assert {(LOOPBACK, stack.scheduler_port), (LOOPBACK, stack.dashboard_port), (LOOPBACK, stack.notebook_port)} \
        <= sockets
    assert len(sockets) >= 9  # + per worker: nanny, worker, its dashboard


def test_quickstart_through_the_cli_service(stack, client):
    before = _clients_seen(client)
    run = stack.compose("run", "--rm", "cli", "reproduce", "quickstart", "--n-rows", "3000", "--seeds", "1",
                        "--m", "10", "20", "--out", "/work/results/quickstart", timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "ELSS-1 (sample)" in run.stdout and "2 passes over the data" in run.stdout
    assert _clients_seen(client) >= before + 1  # it attached to the compose scheduler
    (notebook,) = stack.containers("notebook")
    cat = subprocess.run(["docker", "exec", notebook, "cat", "/work/results/quickstart/quickstart.json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert cat.returncode == 0, cat.stderr  # written to the shared volume
    results = json.loads(cat.stdout)
    assert results["dataset"] == "protein" and results["passes"] == 2
    for method, by_m in results["test_mse"].items():
        for errs in by_m.values():
            assert 0.0 < errs[0] < 0.5, (method, errs)  # beats the mean (MSE ~ 0.2 on the scaled response)


def test_notebook_runs_in_the_notebook_service(stack, client):
    name = "01-quickstart"
    params = {**SMALL[name], "WORK_DIR": "/work/nbtest"}
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    inject_parameters(nb, params)
    (notebook,) = stack.containers("notebook")
    # the notebook goes in on stdin, runs in place on the volume, and comes back on stdout
    script = f"cat > /work/tmp/{name}.ipynb && jupyter execute --inplace --timeout=600 /work/tmp/{name}.ipynb >&2 " \
             f"&& cat /work/tmp/{name}.ipynb"
    proc = subprocess.run(["docker", "exec", "-i", notebook, "sh", "-c", script], input=nbformat.writes(nb),
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = notebook_summary(nbformat.reads(proc.stdout, as_version=4), name)
    assert summary["scheduler"] == stack.scheduler  # attached through DASK_SCHEDULER_ADDRESS
    assert summary["n_workers"] == 2

    def is_file(path: str) -> bool:
        return subprocess.run(["docker", "exec", notebook, "test", "-f", path], timeout=60).returncode == 0

    _check_quickstart(summary, Path("/work/nbtest"), SMALL[name], is_file=is_file)


def test_health_checks_pass_after_the_work(stack):
    assert not_on_loopback(stack.pids()) == []
    for service, n in SERVICES.items():
        containers = stack.containers(service)
        assert len(containers) == n
        for container in containers:
            health = stack.health(container)
            assert health["Status"] == "healthy" and health["FailingStreak"] == 0, (service, health)
            assert health["Log"] and all(entry["ExitCode"] == 0 for entry in health["Log"]), (service, health["Log"])
