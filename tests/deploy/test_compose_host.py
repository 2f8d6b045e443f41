"""The host-network compose file, docker-compose.host.yml, without docker.

- it is exactly what ``deploy/compose_host.py`` derives from docker-compose.yml (so the two
  cannot drift), and shares every setting but the network with it;
- every service is on the host's network with no published port, and every address in it
  (bind addresses, the scheduler's address, health checks, the dashboard link) is 127.0.0.1
  at the ports of ``DXRF_SCHEDULER_PORT``, ``DXRF_DASHBOARD_PORT``, ``DXRF_NOTEBOOK_PORT``;
- the generator refuses a docker-compose.yml its rules do not cover;
- its scheduler and worker commands, run as written on this machine, listen on 127.0.0.1 only,
  and their health checks, run as written, pass (the worker's through the port its preload writes).

tests/deploy/test_compose_stack.py (marker ``docker``) runs the file with docker.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from test_cluster_deploy import (
    Process,
    _check_entry_point,
    _healthcheck_code,
    argv_of,
    load_compose,
    local_argv,
    option,
    set_option,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "docker-compose.yml"
HOST = ROOT / "docker-compose.host.yml"
LOOPBACK = "127.0.0.1"
SHARED = ("image", "build", "volumes", "deploy", "restart", "depends_on", "profiles", "entrypoint")


def _load_generator():
    spec = importlib.util.spec_from_file_location("compose_host", ROOT / "deploy" / "compose_host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compose_host = _load_generator()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def not_on_loopback(pids: list[int]) -> list[str]:
    """The sockets of ``pids`` that listen on, or connect to, anything but 127.0.0.1 (empty: all on loopback)."""
    bad = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for c in conns:
            addrs = [c.laddr] + ([c.raddr] if c.raddr else [])
            if any(a.ip != LOOPBACK for a in addrs):
                bad.append(f"pid {pid}: {c.status} {c.laddr} -> {c.raddr or '-'}")
    return bad


def listening(pids: list[int]) -> set[tuple[str, int]]:
    out = set()
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        out |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return out


def test_host_file_is_what_the_base_file_gives():
    assert HOST.read_text() == compose_host.render(BASE.read_text()), \
        "docker-compose.host.yml is out of date: run python3 deploy/compose_host.py"
    assert compose_host.main(["--check"]) == 0


def test_host_file_shares_everything_but_the_network():
    base_raw = yaml.safe_load(BASE.read_text())["services"]
    host_raw = yaml.safe_load(HOST.read_text())["services"]
    assert list(host_raw) == list(base_raw)
    for name, base in base_raw.items():
        host = host_raw[name]
        assert set(host) == (set(base) - {"ports"}) | {"network_mode"}, name
        for key in SHARED:
            assert host.get(key) == base.get(key), (name, key)
        assert set(host["environment"]) == set(base["environment"]), name
        for key, value in base["environment"].items():
            if "scheduler" not in str(value) and "localhost" not in str(value):
                assert host["environment"][key] == value, (name, key)
        if "healthcheck" in base:
            assert {k: v for k, v in host["healthcheck"].items() if k != "test"} == \
                   {k: v for k, v in base["healthcheck"].items() if k != "test"}, name
        # the command is the base's with loopback addresses and ports, and additions only
        base_cmd, host_cmd = argv_of(base), argv_of(host)
        kept = [a for a in base_cmd if a in host_cmd]
        assert kept == [a for a in host_cmd if a in base_cmd], name  # same order
        changed = set(base_cmd) - set(host_cmd)
        assert all(":" in a or a.isdigit() or a.startswith("--ip=") or a.startswith("--port=") for a in changed), changed


@pytest.mark.parametrize("ports", [None, (18786, 18787, 18888)])
def test_every_address_is_loopback(ports):
    env = {} if ports is None else dict(zip(("DXRF_SCHEDULER_PORT", "DXRF_DASHBOARD_PORT", "DXRF_NOTEBOOK_PORT"),
                                            map(str, ports)))
    sched_port, dash_port, nb_port = ports or (8786, 8787, 8888)
    services = load_compose(HOST, env=env)["services"]
    address = f"tcp://{LOOPBACK}:{sched_port}"
    for name, svc in services.items():
        assert svc["network_mode"] == "host" and "ports" not in svc and "networks" not in svc, name
        assert svc["environment"]["DASK_SCHEDULER_ADDRESS"] == address, name

    sched = argv_of(services["scheduler"])
    assert sched[:2] == ["dask", "scheduler"]
    assert option(sched, "--host") == LOOPBACK and option(sched, "--port") == str(sched_port)
    assert option(sched, "--dashboard-address") == f"{LOOPBACK}:{dash_port}"
    assert f"http://{LOOPBACK}:{dash_port}/health" in _healthcheck_code(services["scheduler"])

    worker = argv_of(services["worker"])
    assert worker[:3] == ["dask", "worker", address]
    assert option(worker, "--host") == LOOPBACK
    assert option(worker, "--dashboard-address") == f"{LOOPBACK}:0"  # several workers share the host's ports
    assert compose_host.PORT_FILE in option(worker, "--preload")
    assert compose_host.PORT_FILE in _healthcheck_code(services["worker"])

    notebook = services["notebook"]
    nb = argv_of(notebook)
    assert option(nb, "--ip") == LOOPBACK and option(nb, "--port") == str(nb_port)
    assert f"http://{LOOPBACK}:{nb_port}/api" in _healthcheck_code(notebook)
    assert notebook["environment"]["DASK_DISTRIBUTED__DASHBOARD__LINK"] == f"http://{LOOPBACK}:{dash_port}/status"


def test_host_commands_are_real_entry_points(capsys):
    for name, svc in load_compose(HOST)["services"].items():
        _check_entry_point(argv_of(svc), capsys)
        if "healthcheck" in svc:
            assert svc["healthcheck"]["test"][0] == "CMD", name
            _check_entry_point(svc["healthcheck"]["test"][1:], capsys)


def _edit(path: list, old: str, new: str) -> str:
    doc = yaml.safe_load(BASE.read_text())
    node = doc
    for key in path[:-1]:
        node = node[key]
    items = node[path[-1]]
    node[path[-1]] = [new if a == old else a for a in items] if isinstance(items, list) else items.replace(old, new)
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("path, old, new, match", [
    (["services", "scheduler", "command"], "8786", "9000", "no single argument '8786'"),
    (["services", "worker", "command"], ":8788", ":9000", "no single argument ':8788'"),
    (["services", "notebook", "command"], "--ip=0.0.0.0", "--ip=0.0.0.0 ", "no single argument '--ip=0.0.0.0'"),
    (["services", "cli", "command"], "--help", "--scheduler=tcp://scheduler:8786", "not on loopback"),
])
def test_rules_that_no_longer_match_fail(path, old, new, match):
    with pytest.raises(ValueError, match=match):
        compose_host.render(_edit(path, old, new))


def test_uncovered_services_and_addresses_fail():
    doc = yaml.safe_load(BASE.read_text())
    doc["services"]["extra"] = {"image": "dxrf:latest", "command": ["dask", "worker", "tcp://127.0.0.1:8786"]}
    with pytest.raises(ValueError, match="without --host"):
        compose_host.render(yaml.safe_dump(doc))
    doc["services"]["extra"]["command"] += ["--host", "0.0.0.0"]
    with pytest.raises(ValueError, match="not on loopback"):
        compose_host.render(yaml.safe_dump(doc))
    doc["services"]["extra"] = {"image": "dxrf:latest", "networks": ["x"]}
    with pytest.raises(ValueError, match="sets networks"):
        compose_host.render(yaml.safe_dump(doc))
    with pytest.raises(TypeError, match="base_text"):
        compose_host.render(b"services: {}")
    with pytest.raises(ValueError, match="base_text"):
        compose_host.render("[]")


def test_scheduler_and_worker_listen_on_loopback_only(tmp_path):
    """The host file's scheduler and worker commands as written (ports interpolated), on this machine."""
    ports = {"DXRF_SCHEDULER_PORT": str(free_port()), "DXRF_DASHBOARD_PORT": str(free_port()),
             "DXRF_WORKER_MEMORY": "1GiB"}
    services = load_compose(HOST, env=ports)["services"]
    port_file = str(tmp_path / "dashboard-port")  # the container's /tmp file, here in a folder of its own

    def here(argv: list[str]) -> list[str]:
        return [a.replace(compose_host.PORT_FILE, port_file) for a in argv]

    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    worker_argv = set_option(argv_of(services["worker"]), "--local-directory", str(tmp_path / "worker"))
    procs = [Process(local_argv(argv_of(services["scheduler"])), env, tmp_path / "scheduler.log", cwd=tmp_path)]
    try:
        health = {name: here([sys.executable, "-c", _healthcheck_code(services[name])])
                  for name in ("scheduler", "worker")}
        deadline = time.monotonic() + 90
        started = False
        while True:
            results = {name: subprocess.run(cmd, capture_output=True, timeout=30, check=False).returncode
                       for name, cmd in health.items()}
            if results["scheduler"] == 0 and not started:
                procs.append(Process(local_argv(here(worker_argv)), env, tmp_path / "worker.log", cwd=tmp_path))
                started = True
            if set(results.values()) == {0}:
                break
            assert all(p.alive() for p in procs), "\n".join(p.tail() for p in procs)
            assert time.monotonic() < deadline, (results, "\n".join(p.tail() for p in procs))
            time.sleep(0.5)

        pids = [p.popen.pid for p in procs]
        pids += [c.pid for p in procs for c in psutil.Process(p.popen.pid).children(recursive=True)]
        assert not_on_loopback(pids) == []
        sockets = listening(pids)
        assert {(LOOPBACK, int(ports["DXRF_SCHEDULER_PORT"])), (LOOPBACK, int(ports["DXRF_DASHBOARD_PORT"])),
                (LOOPBACK, int(Path(port_file).read_text()))} <= sockets
        assert len(sockets) >= 5  # scheduler, its dashboard, nanny, worker, worker's dashboard
        # and the worker's health check fails without its port file
        Path(port_file).unlink()
        assert subprocess.run(health["worker"], capture_output=True, timeout=30, check=False).returncode != 0
    finally:
        for p in reversed(procs):
            p.stop()
