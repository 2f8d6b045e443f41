"""The same random_state gives identical saved models across chunk sizes, worker
counts and repeated runs (hashes of the saved arrays)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
import dxrf.io


def model_hash(path) -> str:
    """SHA-256 over every array of a saved model (names, shapes, dtypes and bytes)."""
    h = hashlib.sha256()
    root = zarr.open_group(str(path), mode="r")

    def visit(group, prefix):
        for name, arr in sorted(group.arrays()):
            data = np.ascontiguousarray(arr[...])
            h.update(f"{prefix}/{name}:{data.shape}:{data.dtype}".encode())
            h.update(data.tobytes())
        for name, sub in sorted(group.groups()):
            visit(sub, f"{prefix}/{name}")

    visit(root, "")
    return h.hexdigest()


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(4000, 6))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=4000)
    root = tmp_path_factory.mktemp("det")
    paths = {}
    for rows in (500, 777, 4000):
        p = root / f"X{rows}.zarr"
        dxrf.io.write_zarr(X, p, y=y, chunk_rows=rows)
        paths[rows] = p
    return paths


def _models():
    return {
        "elss-ridge": dxrf.RandomFeatureRidge(
            dxrf.LeverageScoreSampler(40, n_candidates=300, lam=1e-3, base=dxrf.RandomFourierFeatures(bandwidth="median")),
            alphas=[1e-5, 1e-3, 1e-1],
            random_state=7,
        ),
        "eerf-classifier": dxrf.RandomFeatureClassifier(dxrf.EnergyScoreSelector(30, n_candidates=200), random_state=7),
    }


def _fit_all(paths, tmp_path, tag):
    hashes = {}
    for rows, path in paths.items():
        data = dxrf.io.open_zarr(path)
        for name, model in _models().items():
            target = data.y if name == "elss-ridge" else (data.y > 0)
            model.fit(data.X, target)
            out = tmp_path / f"{tag}-{rows}-{name}"
            model.save(out)
            hashes[rows, name] = model_hash(out)
    return hashes


def test_saved_models_identical_across_chunks_workers_and_runs(stored, tmp_path, cluster2, make_cluster):
    runs = []
    for n_workers in (1, 2):
        cluster = cluster2 if n_workers == 2 else make_cluster(n_workers)
        with Client(cluster):
            runs.append(_fit_all(stored, tmp_path, f"w{n_workers}"))
    for name in _models():
        digests = {run[rows, name] for run in runs for rows in stored}
        assert len(digests) == 1, f"{name}: {len(digests)} different models"
