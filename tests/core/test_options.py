"""Every runtime option is validated when it is set, with the API's exception types."""

from __future__ import annotations

import pytest

import dxrf


@pytest.mark.parametrize(
    "change, exc, message",
    [
        (dict(split_every=1), ValueError, "split_every must be an integer >= 2"),
        (dict(split_every=-1), ValueError, "split_every must be an integer >= 2"),
        (dict(split_every=2.5), TypeError, "split_every must be an integer >= 2"),
        (dict(tile_bytes="big"), TypeError, "tile_bytes must be a positive integer"),
        (dict(tile_bytes=0), ValueError, "tile_bytes must be a positive integer"),
        (dict(min_tile_rows=0), ValueError, "min_tile_rows must be a positive integer"),
        (dict(max_tile_rows=-5), ValueError, "max_tile_rows must be a positive integer"),
        (dict(min_tile_rows=500, max_tile_rows=100), ValueError, "exceeds max_tile_rows"),
        (dict(blas_threads=0), ValueError, "blas_threads must be a positive integer"),
        (dict(blas_threads=True), TypeError, "blas_threads must be a positive integer"),
        (dict(progress="yes"), TypeError, "progress must be True, False or None"),
        (dict(tile_rows=5), ValueError, "unknown dxrf option"),
    ],
)
def test_bad_options_are_refused_and_nothing_changes(change, exc, message):
    before = dxrf.get_options()
    with pytest.raises(exc, match=message):
        with dxrf.options(**change):
            pass
    with pytest.raises(exc, match=message):
        dxrf.set_options(**change)
    assert dxrf.get_options() == before


def test_good_options_apply_and_restore():
    before = dxrf.get_options()
    with dxrf.options(split_every=2, blas_threads=None, tile_bytes=2**20, progress=None) as opts:
        assert opts.split_every == 2 and opts.blas_threads is None
    assert dxrf.get_options() == before
