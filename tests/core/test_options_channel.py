"""Options travel as one explicit object: resolved once at the public entry point, then passed down.

The engine and the solvers' passes read the options they are given, never the
global ones, so a pass follows its caller's options even where the global
defaults (or a ``dxrf.options`` context) say otherwise.
"""

from __future__ import annotations

import threading

import dask
import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf.core.options import Options, resolve_options
from dxrf.engine import Pass, run_pass
from dxrf.stats.tiles import default_tile_rows


def _fan_ins(options: Options, n_chunks: int = 16) -> list[int]:
    """The number of partials of every merge of a dask pass run with ``options``."""
    seen: list[int] = []
    lock = threading.Lock()

    def merge(*parts):
        with lock:
            seen.append(len(parts))
        return sum(parts)

    spec = Pass(block=lambda X, cols, rows, running: float(np.asarray(X).sum()), merge=merge)
    X = da.ones((n_chunks * 10, 2), chunks=(10, 2))
    with dask.config.set(scheduler="sync"):
        assert run_pass(spec, X, options=options) == 2.0 * n_chunks * 10
    return seen


def test_run_pass_uses_the_options_it_is_given_not_the_global_ones():
    given = Options(split_every=2)
    with dxrf.options(split_every=16):
        assert max(_fan_ins(given)) == 2  # the given cap, while the global one is 16
    with dxrf.options(split_every=2):
        assert max(_fan_ins(Options(split_every=16))) == 16


def test_run_pass_needs_an_options_object():
    spec = Pass(block=lambda X, cols, rows, running: 0.0, merge=lambda *p: sum(p))
    with pytest.raises(TypeError):
        run_pass(spec, np.ones((4, 2)))  # no options: internal passes take them explicitly
    with pytest.raises(TypeError, match="Options"):
        run_pass(spec, np.ones((4, 2)), options={"split_every": 2})


def test_tile_rows_follow_the_given_options():
    kernel = dxrf.RandomFourierFeatures(50, random_state=0).fit(np.zeros((2, 3))).kernel_
    small = Options(tile_bytes=1000 * 50 * kernel.dtype.itemsize, min_tile_rows=16)
    with dxrf.options(tile_bytes=2**30):
        assert default_tile_rows(kernel, small) == 1000
        assert default_tile_rows(kernel, resolve_options()) == 10_000


def test_resolve_options_merges_the_context_and_the_call():
    with dxrf.options(split_every=3, progress=False):
        opts = resolve_options(progress=True, split_every=None)
        assert (opts.split_every, opts.progress) == (3, True)  # None keeps the context's value
        assert opts is not dxrf.get_options()  # a snapshot: later changes do not reach it
        assert resolve_options(Options(split_every=5)).split_every == 5  # a caller's options win
    with pytest.raises(ValueError, match="split_every"):
        resolve_options(split_every=1)
    with pytest.raises(ValueError, match="unknown dxrf option"):
        resolve_options(tile_rows=5)
    with pytest.raises(TypeError):
        resolve_options({"split_every": 2})


def test_accumulate_uses_its_options_argument_and_keywords():
    rng = np.random.default_rng(0)
    X = da.from_array(rng.normal(size=(400, 3)), chunks=25)
    y = rng.normal(size=400)
    rff = dxrf.RandomFourierFeatures(20, random_state=1).fit(np.asarray(X[:2]))
    want = dxrf.accumulate(X, y, rff)
    with dxrf.options(split_every=2, tile_bytes=2**20):
        got = dxrf.accumulate(X, y, rff, options=Options())
    for field in ("gram", "cross", "ysum", "yy", "sum"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    with pytest.raises(TypeError, match="progress"):
        dxrf.accumulate(X, y, rff, progress="yes", options=Options())
