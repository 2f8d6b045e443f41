"""Row-wise maps hold their temporaries one tile of rows at a time, whatever the chunks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dxrf
import dxrf.core.memory
import dxrf.engine.maps as maps
from dxrf.engine.maps import map_rows


def _scaled_rows(X, w):
    seen.append(X.shape[0])
    return (X * w).astype(np.float64)


seen: list[int] = []


@pytest.mark.parametrize("dask_input", [False, True])
def test_rows_are_mapped_a_tile_at_a_time(monkeypatch, dask_input):
    X = np.random.default_rng(0).normal(size=(1000, 3))
    width = 50  # the temporaries' columns per row: 12 * 50 bytes a row, so 40 rows a tile below
    monkeypatch.setattr(maps, "MAP_TILE_BYTES", 12 * width * 40)
    seen.clear()
    source = da.from_array(X, chunks=(300, 3)) if dask_input else X
    out = map_rows(source, _scaled_rows, (2.0,), 3, np.float64, work=width)
    out = out.compute(scheduler="sync") if dask_input else out
    np.testing.assert_array_equal(out, 2.0 * X)
    assert max(seen) == 40 and sum(seen) == 1000


def test_a_wide_prediction_of_large_chunks_is_mapped_not_refused(monkeypatch):
    """A chunk whose features would not fit at once: the check counts one tile's, and the model predicts as in one go."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 4))
    y = np.sin(X[:, 0])
    model = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(400, bandwidth=1.5, random_state=0), alpha=1e-4).fit(X, y)
    whole = model.predict(X)
    # a memory limit below one chunk's features (3000 x 400 x 12 bytes = 14 MB) but above a tile's and the result
    monkeypatch.setattr(maps, "MAP_TILE_BYTES", 2 * 2**20)
    monkeypatch.setattr(dxrf.core.memory, "memory_limit", lambda: dxrf.core.memory.Limit(8 * 2**20, "a test limit"))
    tiled = model.predict(X)
    np.testing.assert_allclose(tiled, whole, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="mapping 3000 rows"):
        monkeypatch.setattr(maps, "MAP_TILE_BYTES", 64 * 2**20)  # one tile of all the rows: refused as before
        model.predict(X)
