"""Local Dask clusters for the tests, all made by :func:`dxrf.cluster.local_cluster`.

``cluster2`` is shared by every module that asks for it, so a test using it must
leave it as it found it: no killed or paused workers, no configuration of its
own. Such tests make their own cluster with ``make_cluster`` or an explicit
``local_cluster(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from distributed import Client, LocalCluster
from distributed.core import Status

from dxrf.cluster import local_cluster


@pytest.fixture(scope="session")
def _shared_clusters() -> Iterator[list[LocalCluster]]:
    """Where ``cluster2`` keeps its cluster between modules; closed at the end of the session."""
    clusters: list[LocalCluster] = []
    yield clusters
    for cluster in clusters:
        cluster.close()


def _healthy(cluster: LocalCluster, n_workers: int) -> bool:
    # the scheduler runs in this process: its state is at hand
    workers = cluster.scheduler.workers.values()
    return cluster.status == Status.running and len(workers) == n_workers and all(
        ws.status == Status.running for ws in workers
    )


@pytest.fixture(scope="module")
def cluster2(_shared_clusters: list[LocalCluster]) -> LocalCluster:
    """Two single-threaded worker processes, started once and shared by the modules.

    A module that finds it broken (a worker lost, the scheduler closed) gets a
    fresh one, so that one failure does not fail every later module.
    """
    if _shared_clusters and not _healthy(_shared_clusters[-1], 2):
        _shared_clusters.pop().close()
    if not _shared_clusters:
        _shared_clusters.append(local_cluster(2))
    return _shared_clusters[-1]


@pytest.fixture
def client(cluster2: LocalCluster) -> Iterator[Client]:
    """A client on ``cluster2``, the default scheduler for the test, closed after it."""
    with Client(cluster2) as c:
        yield c


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """``make_cluster(n_workers=2, **options)``: a fresh ``local_cluster``, closed after the test."""
    opened: list[LocalCluster] = []

    def make(n_workers: int = 2, **options: Any) -> LocalCluster:
        cluster = local_cluster(n_workers, **options)
        opened.append(cluster)
        return cluster

    yield make
    for cluster in reversed(opened):
        cluster.close()


# -- markers and the time of each test package ----------------------------------------------

_CLUSTER_FIXTURES = {"cluster2", "client", "make_cluster"}
_package_seconds: dict[str, float] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that runs on a real LocalCluster as ``integration``."""
    for item in items:
        if _CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def _package(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "(top)"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    key = _package(report.nodeid)
    _package_seconds[key] = _package_seconds.get(key, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Seconds spent per test package (setup, call and teardown), so the suite's cost is visible."""
    if not _package_seconds:
        return
    terminalreporter.write_sep("-", "seconds per test package")
    for name, seconds in sorted(_package_seconds.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{name:<12} {seconds:8.1f}")
