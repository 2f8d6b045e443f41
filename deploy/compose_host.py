"""Write docker-compose.host.yml, the host-network variant of docker-compose.yml.

    python3 deploy/compose_host.py            # (re)write docker-compose.host.yml
    python3 deploy/compose_host.py --check    # exit 1 if it is not what docker-compose.yml gives

Compose v1 (the docker-compose that Debian packages) merges ``ports`` of an override file into
the base file's, so an override cannot turn a service with published ports into a
``network_mode: host`` one (docker refuses port bindings on the host network), and the
``!reset`` tag that removes them exists only in compose v2.24+. The host-network file is
therefore a complete compose file, derived here from docker-compose.yml by fixed rules, so
that the two cannot drift apart (tests/deploy/test_compose_host.py runs ``--check``'s comparison):

- every service gets ``network_mode: host`` and loses ``ports``;
- the processes bind 127.0.0.1 and address each other there: the scheduler listens on
  ``$DXRF_SCHEDULER_PORT``, its dashboard on ``$DXRF_DASHBOARD_PORT``, Jupyter on
  ``$DXRF_NOTEBOOK_PORT`` (the base file's host ports become the ports they listen on);
- the workers (and their nannies) bind 127.0.0.1 on free ports; several worker containers
  share the host's ports, so each worker's dashboard takes a free one as well, and a preload
  writes it to a file in the container for the health check.

A rule that no longer matches docker-compose.yml raises ValueError naming it, and so does any
address in the result that is not on loopback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "docker-compose.yml"
HOST = ROOT / "docker-compose.host.yml"

LOOPBACK = "127.0.0.1"
SCHEDULER_PORT = "${DXRF_SCHEDULER_PORT:-8786}"
DASHBOARD_PORT = "${DXRF_DASHBOARD_PORT:-8787}"
NOTEBOOK_PORT = "${DXRF_NOTEBOOK_PORT:-8888}"
SCHEDULER = f"tcp://{LOOPBACK}:{SCHEDULER_PORT}"
# in the worker container's own /tmp: the port of that container's worker only
PORT_FILE = "/tmp/dxrf-dashboard-port"
# distributed runs preload text (anything with a space) as a script after the worker has started
PRELOAD = (f"import pathlib; dask_setup = lambda worker: "
           f"pathlib.Path({PORT_FILE!r}).write_text(str(worker.http_server.port))")

# command arguments: each key must be one argument of the service's command, replaced by the list
COMMAND_RULES: dict[str, dict[str, list[str]]] = {
    "scheduler": {
        "scheduler": ["scheduler", "--host", LOOPBACK],
        "8786": [SCHEDULER_PORT],
        ":8787": [f"{LOOPBACK}:{DASHBOARD_PORT}"],
    },
    "worker": {
        "tcp://scheduler:8786": [SCHEDULER, "--host", LOOPBACK],
        ":8788": [f"{LOOPBACK}:0", "--preload", PRELOAD],
    },
    "notebook": {
        "--ip=0.0.0.0": [f"--ip={LOOPBACK}"],
        "--port=8888": [f"--port={NOTEBOOK_PORT}"],
    },
}

# text in health checks and environment values: each key must occur in the service
TEXT_RULES: dict[str, dict[str, str]] = {
    "scheduler": {f"http://{LOOPBACK}:8787/": f"http://{LOOPBACK}:{DASHBOARD_PORT}/"},
    "worker": {f"'http://{LOOPBACK}:8788/health'": f"'http://{LOOPBACK}:' + open({PORT_FILE!r}).read() + '/health'"},
    "notebook": {
        f"http://{LOOPBACK}:8888/": f"http://{LOOPBACK}:{NOTEBOOK_PORT}/",
        "http://localhost:${DXRF_DASHBOARD_PORT:-8787}/": f"http://{LOOPBACK}:{DASHBOARD_PORT}/",
    },
}
# in every service that has it
SCHEDULER_ADDRESS = ("tcp://scheduler:8786", SCHEDULER)

# no string of the result may name another host or every interface
NOT_LOOPBACK = ("tcp://scheduler", "0.0.0.0", "localhost")
# options whose value is an address to bind, and the servers that bind every interface without one
BIND_OPTIONS = ("--host", "--ip", "--dashboard-address", "--listen-address")
MUST_BIND = {("dask", "scheduler"): "--host", ("dask", "worker"): "--host", ("jupyter", "lab"): "--ip"}

HEADER = """\
# dxrf with docker compose on the host's network (Linux): every service shares the host's
# network stack and listens on 127.0.0.1 only, so every connection (clients, scheduler,
# workers, Jupyter, health checks) stays on loopback; no docker network, no published port.
#
#   docker compose -f docker-compose.host.yml up -d --scale worker=4
#   docker compose -f docker-compose.host.yml logs notebook     # Jupyter's URL with its token
#   docker compose -f docker-compose.host.yml run --rm cli reproduce quickstart --out /work/results/quickstart
#   docker compose -f docker-compose.host.yml down              # (-v also deletes the data volume)
#
#   Scheduler tcp://127.0.0.1:8786   Dashboard http://127.0.0.1:8787/status   Jupyter http://127.0.0.1:8888/lab
#
# Written by `python3 deploy/compose_host.py` from docker-compose.yml (edit that one and
# rerun; a test checks that the two agree). The settings are that file's, except that
# DXRF_SCHEDULER_PORT, DXRF_DASHBOARD_PORT and DXRF_NOTEBOOK_PORT are the loopback ports the
# scheduler, its dashboard and Jupyter listen on, and DXRF_BIND does not apply. The workers
# and their nannies listen on free loopback ports; each worker writes its dashboard's port
# to /tmp/dxrf-dashboard-port in its container, where its health check reads it.
# The TLS override (docker-compose.tls.yml) is for docker-compose.yml, not this file.

"""


class _Dumper(yaml.SafeDumper):
    """Block style, except lists of plain values (commands, health checks) on one line; no anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = all(isinstance(item, (str, int, float)) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Python code in double quotes, as in docker-compose.yml, rather than with doubled single quotes
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"' if "'" in data else None)


def _represent_none(dumper: yaml.SafeDumper, data: None) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:null", "")  # `JUPYTER_TOKEN:`, taken from the shell


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(type(None), _represent_none)


def _rewrite_command(name: str, command: list[str], rules: dict[str, list[str]]) -> list[str]:
    for old in rules:
        if command.count(old) != 1:
            raise ValueError(f"docker-compose.yml: the {name} command {command} has no single argument {old!r} "
                             f"for the host-network rules of deploy/compose_host.py")
    return [new for arg in command for new in rules.get(arg, [arg])]


def _rewrite_text(value: object, rules: dict[str, str], used: set[str]) -> object:
    if isinstance(value, dict):
        return {k: _rewrite_text(v, rules, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite_text(v, rules, used) for v in value]
    if not isinstance(value, str):
        return value
    for old, new in rules.items():
        if old in value:
            used.add(old)
            value = value.replace(old, new)
    return value


def _strings(value: object):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def host_service(name: str, service: dict) -> dict:
    """The host-network form of one service of docker-compose.yml (anchors already resolved).

    Raises
    ------
    ValueError
        If a rule for ``name`` does not match, or an address of the result is not on loopback.
    """
    if not isinstance(service, dict):
        raise TypeError(f"service {name!r}: expected a mapping, got {type(service).__name__}")
    out: dict = {}
    for key, value in service.items():
        if key == "ports":
            continue
        if key in ("networks", "network_mode"):
            raise ValueError(f"docker-compose.yml: service {name!r} sets {key}; the host-network file sets it")
        out[key] = value
        if key == "image":
            out["network_mode"] = "host"
    out.setdefault("network_mode", "host")

    if name in COMMAND_RULES:
        command = out.get("command")
        if not isinstance(command, list):
            raise ValueError(f"docker-compose.yml: the {name} command must be a list, got {command!r}")
        out["command"] = _rewrite_command(name, command, COMMAND_RULES[name])

    rules = dict(TEXT_RULES.get(name, {}))
    used: set[str] = set()
    for key in ("healthcheck", "environment"):
        if key in out:
            out[key] = _rewrite_text(out[key], {**rules, SCHEDULER_ADDRESS[0]: SCHEDULER_ADDRESS[1]}, used)
    if missing := set(rules) - used:
        raise ValueError(f"docker-compose.yml: service {name!r} has no {sorted(missing)} for the host-network rules")

    _check_loopback(name, out)
    return out


def _check_loopback(name: str, service: dict) -> None:
    def fail(what: str) -> None:
        raise ValueError(f"service {name!r}: {what} is not on loopback; add a rule to deploy/compose_host.py")

    for text in _strings({k: v for k, v in service.items() if k in ("command", "healthcheck", "environment")}):
        if any(bad in text for bad in NOT_LOOPBACK):
            fail(repr(text))
    command = [str(a) for a in service.get("command") or []]
    for i, arg in enumerate(command):
        flag, eq, value = arg.partition("=")
        if flag in BIND_OPTIONS:
            value = value if eq else (command[i + 1] if i + 1 < len(command) else "")
            if not value.startswith(LOOPBACK):
                fail(f"{flag} {value!r}")
    flag = MUST_BIND.get(tuple(command[:2]))
    if flag and not any(a.partition("=")[0] == flag for a in command):
        fail(f"{' '.join(command[:2])} without {flag} (it binds every interface)")


def render(base_text: str) -> str:
    """The text of docker-compose.host.yml for the text of docker-compose.yml."""
    if not isinstance(base_text, str):
        raise TypeError(f"base_text: expected str, got {type(base_text).__name__}")
    base = yaml.safe_load(base_text)
    if not isinstance(base, dict) or not isinstance(base.get("services"), dict):
        raise ValueError("base_text: not a compose file with services")
    unknown = set(base) - {"services", "volumes"} - {k for k in base if k.startswith("x-")}
    if unknown:
        raise ValueError(f"docker-compose.yml: top-level {sorted(unknown)} not covered by deploy/compose_host.py")
    doc = {"services": {name: host_service(name, svc) for name, svc in base["services"].items()}}
    if "volumes" in base:
        doc["volumes"] = base["volumes"]
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10_000, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    text = render(BASE.read_text())
    if args.check:
        if not HOST.exists() or HOST.read_text() != text:
            print(f"{HOST.name} is out of date: run python3 deploy/compose_host.py", file=sys.stderr)
            return 1
        return 0
    HOST.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
