"""A newcomer's rough edges: errors that name the fix, and signals that leave nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dxrf
from dxrf.cli.commands import main


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, *capsys.readouterr()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    X = np.random.default_rng(0).normal(size=(60, 3))
    ridge = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(n_components=8, bandwidth=1.0, random_state=0))
    ridge.fit(X, X[:, 0]).save(d / "ridge.model", metadata={"columns": ["a", "b", "c"], "classes": None})
    clf = dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(n_components=8, bandwidth=1.0, random_state=0))
    clf.fit(X, np.where(X[:, 0] > 0, "yes", "no")).save(d / "clf.model")
    dxrf.RandomFourierFeatures(n_components=8, bandwidth=1.0, random_state=0).fit(X).save(d / "rff.model")
    dxrf.NystroemFeatures(n_components=5, bandwidth=1.0, random_state=0).fit(X).save(d / "nys.model")
    (d / "t.csv").write_text("a,b,c\n" + "".join(f"{r[0]},{r[1]},{r[2]}\n" for r in X))
    dxrf.io.ingest(d / "t.csv", d / "t.zarr")
    return d


@pytest.mark.parametrize("name,expect", [
    ("ridge.model", ["model:    RandomFeatureRidge", "inputs:   3 columns: a, b, c", "predicts: a number"]),
    ("clf.model", ["model:    RandomFeatureClassifier", "classes:  ['no', 'yes']"]),
    ("rff.model", ["model:    RandomFourierFeatures", "transform only"]),
    ("nys.model", ["model:    NystroemFeatures", "transform only"]),
])
def test_info_describes_a_model(models, capsys, name, expect):
    code, out, err = _run(["info", str(models / name)], capsys)
    assert code == 0, err
    for line in expect:
        assert line in out, out


@pytest.mark.parametrize("name", ["rff.model", "nys.model"])
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_feature_maps_do_not_predict(models, capsys, name, command):
    argv = [command, str(models / name), str(models / "t.zarr")] + (["--out", str(models / "p.csv")] if command == "predict" else [])
    code, _, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "which transforms data but does not predict" in lines[0] and "AttributeError" not in lines[0]


def test_fit_help_states_the_search_grid(capsys):
    """The help states how the default search chooses M: from the search's own constants."""
    from dxrf.search.growth import FIRST_STAGE_MAX, GrowthBudget

    code, out, _ = _run(["fit", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert f"grows M from {FIRST_STAGE_MAX >> 3} in stages" in text
    assert f"(default {GrowthBudget().max_components})" in text and f"(default {GrowthBudget().time_budget:g};" in text


def test_sigterm_during_ingest_leaves_nothing(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "big.csv"
    rows = rng.normal(size=(300_000, 4))
    np.savetxt(src, rows, delimiter=",", header="a,b,c,y", comments="", fmt="%.6f")
    dest = tmp_path / "out.zarr"
    env = dict(os.environ, PYTHONPATH=str(Path(dxrf.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "dxrf.cli", "ingest", str(src), str(dest), "--target", "y",
                             "--chunk-rows", "2000", "--scheduler", "none"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not list(tmp_path.glob("out.zarr.tmp-*")):
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("the ingest finished before it could be signalled")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0 and dest.exists():
        pytest.skip("the ingest published its group just before the signal")
    assert proc.returncode == 130, (proc.returncode, err, out)
    assert "dxrf: interrupted" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv"]


@pytest.mark.parametrize("spec,value", [("median*0.25", 0.1234), ("median*16", 1234.5678), ("median", 1e-7), (1.5, 1.5)])
def test_results_table_columns_line_up(spec, value):
    from dxrf.search.results import format_table

    obj = lambda *v: np.array(list(v), dtype=object)  # noqa: E731
    results = {
        "rank_test_score": np.array([1, 2]), "param_lam": obj(None, 1e-3), "param_rho": obj(None, None),
        "param_bandwidth": obj(spec, 2.0), "bandwidth_value": np.array([value, 2.0]),
        "param_selection": np.array(["none", "elss-sample"]), "param_n_components": np.array([100, 1000]),
        "param_alpha": np.array([1e-3, 1e-10]), "mean_test_score": np.array([0.9, 0.8]),
        "mean_validation_mse": np.array([0.1, 0.2]),
    }
    lines = format_table(results).splitlines()
    assert len({len(line) for line in lines}) == 1, lines
    col = lines[0].index("bandwidth") + len("bandwidth")
    assert all(line[col - 1] != " " for line in lines[1:]), lines  # right-aligned under its header


@pytest.mark.parametrize("flag, value, message", [
    ("--time-budget", "-1", "expected a number of seconds >= 0 (0: no limit), got '-1'"),
    ("--time-budget", "soon", "expected a number of seconds >= 0 (0: no limit), got 'soon'"),
    ("--time-budget", "inf", "expected a number of seconds >= 0 (0: no limit), got 'inf'"),
    ("--max-components", "0", "expected a positive integer, got '0'"),
    ("--max-components", "2.5", "expected a positive integer, got '2.5'"),
])
def test_the_growth_budget_flags_refuse_bad_values_in_one_line(tmp_path, capsys, flag, value, message):
    code, _, err = _run(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m"), flag, value], capsys)
    assert code == 2 and message in err and err.count("error:") == 1


def test_the_growth_budget_flags_reach_the_search():
    from dxrf.cli.commands import build_parser
    from dxrf.cli.models import build_search

    args = build_parser().parse_args(["fit", "d.zarr", "--out", "m", "--time-budget", "0", "--max-components", "3000"])
    search = build_search(args, classification=False)
    assert search.time_budget is None and search.max_components == 3000 and search.n_components == "auto"
    args = build_parser().parse_args(["fit", "d.zarr", "--out", "m"])
    assert build_search(args, classification=False).time_budget == 300.0
