"""Module paths of earlier releases still import, with a DeprecationWarning, from their new place."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import dxrf


@pytest.mark.parametrize("old, new", sorted(dxrf._MOVED_MODULES.items()))
def test_an_old_module_path_forwards_to_the_new_module(old, new):
    module = importlib.import_module(new)
    public = [n for n in vars(module) if not n.startswith("_")]
    name = public[0]
    alias = sys.modules[old]
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        assert getattr(alias, name) is getattr(module, name)


def test_old_from_imports_work_and_options_stays_the_context_manager():
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import dxrf, dxrf.options\n"
        "assert callable(dxrf.options) and dxrf.options.__module__ == 'dxrf.core.options'\n"
        "try:\n"
        "    from dxrf.scoring import score_models\n"
        "except DeprecationWarning as w:\n"
        "    assert 'dxrf.stats.scoring' in str(w)\n"
        "else:\n"
        "    raise SystemExit('no warning')\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from dxrf.learners.logistic import fit_multinomial\n"
        "from dxrf.data_cache import cache_dir\n"
        "from dxrf.stats import FeatureStats, accumulate\n"
        "from dxrf.persist import ModelFormatError, load, save\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_an_unknown_name_of_a_moved_module_is_an_attribute_error():
    with pytest.warns(DeprecationWarning), pytest.raises(AttributeError):
        sys.modules["dxrf.scoring"].no_such_name
