"""Losing a worker process in the middle of a pass over zarr data loses no work and changes nothing.

A real ``LocalCluster`` of two worker processes (each under a nanny) reads
zarr data from disk. While a pass runs, one worker process is killed with
SIGKILL once a given share of the pass's tasks has finished; Dask
reschedules its tasks (and recomputes the partial results it held), the
nanny restarts it, and the pass must give exactly what the undisturbed pass
gave. The moment of the kill is measured in finished tasks, not seconds, so
the test does not depend on the speed or load of the machine.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import dask
import numpy as np
import pytest
from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin

import dxrf
import dxrf.io
from dxrf.cluster import local_cluster

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


class _TaskCounter(SchedulerPlugin):
    """Counts tasks that finish (processing -> memory) on the scheduler."""

    name = "dxrf-test-task-counter"

    def __init__(self) -> None:
        self.finished = 0

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if start == "processing" and finish == "memory":
            self.finished += 1


@pytest.fixture(scope="module")
def cluster():
    config = {
        # a worker that died is not worth 30 s of connection attempts
        "distributed.comm.timeouts.connect": "10s",
        # on a loaded machine a nanny may take more than the default 15 s to
        # restart its worker; the cluster must not give up on it meanwhile
        "distributed.deploy.lost-worker-timeout": "300s",
    }
    with dask.config.set(config):
        # its own cluster: the tests kill its workers
        with local_cluster(2, memory_limit="2GiB", dashboard_address=":0") as c, Client(c) as client:
            counter = _TaskCounter()
            # the scheduler runs in this process: add the plugin on its event loop
            client.sync(_add_plugin, c.scheduler, counter)
            yield client, counter


async def _add_plugin(scheduler, plugin) -> None:
    scheduler.add_plugin(plugin)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("loss") / "data.zarr"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(48_000, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=X.shape[0])
    dxrf.io.write_zarr(X, path, y=y, chunk_rows=2_000)  # 24 chunks on disk
    return dxrf.io.open_zarr(path)


def _pids(client: Client) -> dict[str, int]:
    return client.run(os.getpid)


def _count_tasks(counter: _TaskCounter, fn) -> tuple[object, int]:
    before = counter.finished
    out = fn()
    return out, counter.finished - before


def _run_and_kill(client: Client, counter: _TaskCounter, fn, kill_at: int, timeout: float = 180.0):
    """Run ``fn()`` in a thread; SIGKILL a busy worker once ``kill_at`` tasks have finished.

    Returns (result, info); info records the pid killed and whether ``fn``
    was still running at that moment.
    """
    pids = _pids(client)
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    start = counter.finished
    thread = threading.Thread(target=target, daemon=True)
    t0 = time.perf_counter()
    thread.start()
    info: dict = {"killed": None}
    while thread.is_alive() and time.perf_counter() - t0 < timeout:
        if info["killed"] is None and counter.finished - start >= kill_at:
            busy = [addr for addr, keys in client.processing().items() if keys and addr in pids]
            if busy:
                info["still_running"] = thread.is_alive()
                info["finished_before_kill"] = counter.finished - start
                os.kill(pids[busy[0]], signal.SIGKILL)
                info["killed"] = pids[busy[0]]
        time.sleep(0.005)
    thread.join(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
    assert not thread.is_alive(), "the pass did not finish after the worker was killed"
    if "error" in box:
        raise box["error"]
    info["finished"] = counter.finished - start
    return box["result"], info


def _wait_for_workers(client: Client, n: int, killed_pid: int | None = None, timeout: float = 120.0) -> None:
    """Wait until n workers run (the nanny restarts a killed one), none with the dead pid."""
    deadline = time.monotonic() + timeout
    pids: dict = {}
    while time.monotonic() < deadline:
        try:
            pids = _pids(client)
        except Exception:  # noqa: BLE001 - a worker mid-restart may not answer yet
            pids = {}
        if len(pids) == n and killed_pid not in pids.values():
            return
        time.sleep(0.2)
    raise AssertionError(f"the cluster did not get back to {n} workers (pids now {pids})")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300))


def test_statistics_pass_survives_a_killed_worker(cluster, data):
    client, counter = cluster
    _wait_for_workers(client, 2)
    fmap = dxrf.RandomFourierFeatures(400, bandwidth=2.0, random_state=0).fit(data.X)

    def run():
        return dxrf.accumulate(data.X, data.y, features=fmap, split=0.2, progress=False)

    (ref_train, ref_valid), n_tasks = _count_tasks(counter, run)
    assert n_tasks >= 24
    # kill once a quarter of the tasks are done: some partial results are held
    # by the victim (and lost with it), some of its tasks are still to run
    (train, valid), info = _run_and_kill(client, counter, run, kill_at=max(2, n_tasks // 4))
    assert info["killed"] is not None and info["still_running"], info
    assert info["finished_before_kill"] < n_tasks
    _wait_for_workers(client, 2, info["killed"])

    for ref, got in ((ref_train, train), (ref_valid, valid)):
        assert got.n == ref.n
        for name in ("gram", "sum", "cross", "ysum", "yy"):
            assert _rel(getattr(got, name), getattr(ref, name)) <= 1e-12, name
        # the same chunks summed by the same tree: in fact bitwise equal
        np.testing.assert_array_equal(got.gram, ref.gram)
        np.testing.assert_array_equal(got.cross, ref.cross)
    assert train.n + valid.n == data.n_rows


@pytest.mark.parametrize("cache", [False, True])
def test_sequential_sgd_survives_a_killed_worker(cluster, data, cache):
    """With the cache, the killed worker's feature blocks are recomputed from X by their lineage."""
    sgd = pytest.importorskip("dxrf.learners.sgd")
    client, counter = cluster
    _wait_for_workers(client, 2)

    def fit():
        est = sgd.RandomFeatureSGDRegressor(
            dxrf.RandomFourierFeatures(150, bandwidth=2.0, random_state=0),
            mode="sequential",
            batch_size=32,
            max_passes=2,
            validation=0.2,
            early_stopping=False,
            random_state=0,
            cache_features=cache,
        )
        return est.fit(data.X, data.y)

    ref, n_tasks = _count_tasks(counter, fit)
    assert ref.feature_cache_ == ("cached" if cache else "recomputed")
    assert n_tasks >= 2 * 24
    # in the middle of the second pass: the chain's state is on the move
    est, info = _run_and_kill(client, counter, fit, kill_at=int(0.6 * n_tasks))
    assert info["killed"] is not None and info["still_running"], info
    assert info["finished_before_kill"] < n_tasks
    _wait_for_workers(client, 2, info["killed"])

    # every update applied exactly once, in the same order: the same iterate
    assert est.n_iter_ == ref.n_iter_
    assert _rel(est.coef_, ref.coef_) <= 1e-12
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    np.testing.assert_array_equal(est.validation_errors_, ref.validation_errors_)
    np.testing.assert_array_equal(est.train_errors_, ref.train_errors_)


def test_sequential_sgd_survives_losing_the_holder_of_its_state(cluster, data):
    """The worst moment: the worker holding a pass's freshly scattered start state dies."""
    sgd = pytest.importorskip("dxrf.learners.sgd")
    client, _ = cluster
    _wait_for_workers(client, 2)

    def fit():
        est = sgd.RandomFeatureSGDRegressor(
            dxrf.RandomFourierFeatures(150, bandwidth=2.0, random_state=0),
            mode="sequential", batch_size=32, max_passes=2, validation=0.2, early_stopping=False, random_state=0,
        )
        return est.fit(data.X, data.y)

    ref = fit()
    pids = _pids(client)
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=_capture(fit)), daemon=True)
    thread.start()
    seen: set = set()
    killed = None
    while thread.is_alive():
        states = {k: v for k, v in client.who_has().items() if str(k).startswith("_State")}
        fresh = [k for k in states if k not in seen]
        seen |= set(states)
        if killed is None and len(seen) >= 2 and fresh and len(states[fresh[0]]) == 1:
            killed = pids[states[fresh[0]][0]]  # the second pass's start state, on one worker only
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.002)
    thread.join()
    if killed is None:
        pytest.skip("the start state was copied to both workers before it could be targeted")
    _wait_for_workers(client, 2, killed)
    result = box["result"]
    if isinstance(result, BaseException):
        raise result
    np.testing.assert_array_equal(result.coef_, ref.coef_)


def _capture(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - handed to the test thread
        return exc


def test_multi_map_pass_survives_a_killed_worker(cluster, data):
    """Several feature maps from one read: a lost worker's partials are recomputed, bitwise."""
    client, counter = cluster
    _wait_for_workers(client, 2)
    maps = [dxrf.RandomFourierFeatures(200, bandwidth=b, random_state=i).fit(data.X) for i, b in enumerate((1.0, 2.0, 4.0))]

    def run():
        return dxrf.accumulate(data.X, data.y, features=maps, split=0.2, progress=False)

    ref, n_tasks = _count_tasks(counter, run)
    got, info = _run_and_kill(client, counter, run, kill_at=max(2, n_tasks // 3))
    assert info["killed"] is not None and info["still_running"], info
    _wait_for_workers(client, 2, info["killed"])
    for (rt, rv), (gt, gv) in zip(ref, got):
        for r, g in ((rt, gt), (rv, gv)):
            assert g.n == r.n
            for name in ("gram", "sum", "cross", "ysum", "yy"):
                np.testing.assert_array_equal(getattr(g, name), getattr(r, name))


def test_logistic_fit_survives_a_killed_worker(cluster, data):
    """Newton passes over zarr with a worker killed mid-fit give the same model."""
    client, counter = cluster
    _wait_for_workers(client, 2)
    labels = (data.y > 0).astype("int64")

    def fit():
        return dxrf.RandomFeatureClassifier(
            dxrf.RandomFourierFeatures(150, bandwidth=2.0, random_state=0), loss="logistic", alpha=1e-3
        ).fit(data.X, labels)

    ref, n_tasks = _count_tasks(counter, fit)
    assert ref.n_passes_ >= 3
    est, info = _run_and_kill(client, counter, fit, kill_at=max(2, n_tasks // 2))
    assert info["killed"] is not None and info["still_running"], info
    _wait_for_workers(client, 2, info["killed"])
    assert est.n_passes_ == ref.n_passes_
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a fixed 6 iterations, on purpose
@pytest.mark.parametrize("cache", [False, True])
def test_pcg_solve_survives_a_killed_worker(cluster, data, cache):
    client, counter = cluster
    _wait_for_workers(client, 2)
    landmarks = np.random.default_rng(1).normal(size=(100, 8))

    def fit():
        # a fixed number of conjugate-gradient passes (tol far below reach): the same work each run;
        # with the cache, the lost worker's kernel values are recomputed from their lineage
        features = dxrf.NystroemFeatures(landmarks=landmarks, bandwidth=2.0, whitening="cholesky")
        with dxrf.options(cache_features=cache):
            model = dxrf.RandomFeatureRidge(features, alpha=1e-3, solver="pcg", tol=1e-300, max_iter=6)
            return model.fit(data.X, data.y)

    ref, n_tasks = _count_tasks(counter, fit)
    assert ref.n_iter_ == 6 and n_tasks >= 7 * 24
    # in the middle of the CG passes: a lane's partial products are lost with the worker
    est, info = _run_and_kill(client, counter, fit, kill_at=int(0.5 * n_tasks))
    assert info["killed"] is not None and info["still_running"], info
    assert info["finished_before_kill"] < n_tasks
    _wait_for_workers(client, 2, info["killed"])
    assert est.n_iter_ == ref.n_iter_ and est.n_passes_ == ref.n_passes_
    assert _rel(est.coef_, ref.coef_) <= 1e-12
    np.testing.assert_array_equal(est.pcg_history_, ref.pcg_history_)
    assert est.feature_cache_ == ref.feature_cache_ == ("cached" if cache else "recomputed")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("loss", ["logistic", "multinomial"])
def test_cached_fit_survives_a_killed_worker(cluster, data, loss):
    """With the feature cache: the killed worker's feature blocks are recomputed from X, the model is the same."""
    client, counter = cluster
    _wait_for_workers(client, 2)
    labels = (data.y > 0).astype("int64") if loss == "logistic" else np.digitize(data.y, [-0.5, 0.5])

    def fit(cache):
        return dxrf.RandomFeatureClassifier(
            dxrf.RandomFourierFeatures(150, bandwidth=2.0, random_state=0), loss=loss, alpha=1e-3, max_iter=6,
            cache_features=cache,
        ).fit(data.X, labels)

    ref = fit(False)
    (est, n_tasks) = _count_tasks(counter, lambda: fit(True))
    assert est.feature_cache_ == "cached" and est.n_passes_ >= 3
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    # kill after the cache is built (24 feature tasks) and a pass or two: blocks are lost with the worker
    est, info = _run_and_kill(client, counter, lambda: fit(True), kill_at=max(30, n_tasks // 2))
    assert info["killed"] is not None and info["still_running"], info
    _wait_for_workers(client, 2, info["killed"])
    assert est.feature_cache_ == "cached" and est.n_passes_ == ref.n_passes_
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
