"""A persisted X held unevenly: its chunks join the lanes of less busy workers, without changing a bit."""

from __future__ import annotations

import pickle
import sys

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream, wait

import dxrf
from dxrf.engine import lanes as lanes_module
from dxrf.engine.lanes import _evened
from dxrf.stats.compensated import CompensatedSums, packed_size


def test_evened_moves_the_fewest_chunks_to_an_even_share():
    two = {"a": 1, "b": 1}
    assert _evened(["a"] * 11 + ["b"] * 9, [1] * 20, two) == ["a"] * 10 + ["b"] * 10  # the last of equals moves
    assert _evened(["a"] * 10 + ["b"] * 10, [1] * 20, two) == ["a"] * 10 + ["b"] * 10
    assert _evened(["a"] * 4, [5, 5, 5, 5], {"a": 1, "b": 1, "c": 2}) == ["a", "c", "c", "b"]  # per thread
    # the smallest chunk that lowers the busiest load moves; one that would not is kept
    assert _evened(["a", "a", "b"], [10, 3, 4], two) == ["a", "b", "b"]
    assert _evened(["a", "b"], [10, 2], two) == ["a", "b"]
    # within the tolerance nothing moves
    assert _evened(["a"] * 51 + ["b"] * 50, [1] * 101, two) == ["a"] * 51 + ["b"] * 50


def test_compensated_sums_report_their_arrays_to_sizeof():
    sums = CompensatedSums(300, 2)
    arrays = 2 * 8 * (packed_size(300) + 300 + 300 * 2 + 2 + 4)
    assert arrays <= sys.getsizeof(sums) < arrays + 10_000
    assert dask.sizeof.sizeof(sums) >= arrays
    assert sys.getsizeof(pickle.loads(pickle.dumps(sums))) >= arrays


def test_a_pass_over_chunks_held_by_one_worker_runs_on_both(client):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8000, 5))
    workers = sorted(client.nthreads())
    # 16 small chunks all on one worker; a lane's partial (M = 300: 0.7 MB) outweighs a chunk (20 kB)
    held = client.persist(da.from_array(X, chunks=(500, 5)), workers=workers[:1])
    wait(held)
    assert {w for ws in client.who_has(held).values() for w in ws} == {workers[0]}
    kernel = dxrf.RandomFourierFeatures(300, bandwidth=2.0, random_state=0).fit(X).kernel_
    assert len(set(lanes_module.lane_plan(held)[0])) == 2  # moving nothing: two lanes on the holder
    lanes, move_to = lanes_module.lane_plan(held, move_below=20_001)  # chunks of 20 000 bytes may move
    assert len(set(lanes)) == 4 and move_to.count(workers[1]) == 8 and move_to.count(None) == 8
    assert lanes_module.lane_plan(held, move_below=20_000)[1] == [None] * 16  # not smaller than the partial
    with get_task_stream(client) as ts:
        got = dxrf.accumulate(held, features=kernel)
    ran = {t["worker"] for t in ts.data if "call_block" in str(t["key"])}
    assert ran == set(workers)
    with dask.config.set(scheduler="sync"):
        want = dxrf.accumulate(da.from_array(X, chunks=(1000, 5)), features=kernel)
    np.testing.assert_array_equal(got.gram, want.gram)
    np.testing.assert_array_equal(got.sum, want.sum)


def test_lane_plans_without_a_cluster_or_with_forced_lanes_move_nothing():
    X = da.zeros((400, 3), chunks=(100, 3))
    assert lanes_module.lane_plan(X, move_below=10**9) == ([0, 1, 2, 3], [None] * 4)
    assert lanes_module.lane_plan(X, 2, move_below=10**9) == ([0, 1, 0, 1], [None] * 4)
