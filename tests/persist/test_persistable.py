"""The registry of persistable classes: each class declares its fitted attributes and registers itself."""

from __future__ import annotations

import pytest

import dxrf
from dxrf.core import persistable
from dxrf.core.persistable import COMMON, KINDS, MAP, SaveMixin, fitted, fitted_schema, lookup, registered
from dxrf.persist import schema


@pytest.fixture
def scratch_registry(monkeypatch):
    # classes defined by a test must not stay registered (test_files saves every registered class)
    monkeypatch.setattr(persistable, "_REGISTRY", dict(persistable._REGISTRY))


def test_a_class_registers_itself_with_its_declared_attributes(scratch_registry):
    class ToyModel(SaveMixin):
        _fitted_schema = fitted(COMMON, coef_="finite", history_="numbers?")

    assert lookup("ToyModel") is ToyModel
    assert registered()["ToyModel"] is ToyModel
    # the shared block comes first, then the class's own entries, in order
    assert list(fitted_schema(ToyModel).items()) == [
        ("n_features_in_", "int"), ("feature_names_in_", "names?"), ("coef_", "finite"), ("history_", "numbers?"),
    ]
    with pytest.raises(TypeError):  # read-only: a declaration is not changed after registration
        ToyModel._fitted_schema["coef_"] = "str"


def test_a_subclass_that_declares_nothing_is_not_registered(scratch_registry):
    class ToyMap(SaveMixin):
        _fitted_schema = MAP

    class ToyMapVariant(ToyMap):
        pass

    assert lookup("ToyMapVariant") is None
    with pytest.raises(TypeError, match="declares no fitted attributes"):
        fitted_schema(ToyMapVariant)


def test_a_declaration_of_an_unknown_kind_is_refused(scratch_registry):
    with pytest.raises(TypeError, match="unknown kind 'matrix'"):
        class BadKind(SaveMixin):
            _fitted_schema = fitted(COMMON, coef_="matrix")
    assert lookup("BadKind") is None


@pytest.mark.parametrize("schema", [{"Coef_": "finite"}, {"coef": "finite"}, {"_coef_": "finite"}, ["coef_"]])
def test_a_malformed_declaration_is_refused(scratch_registry, schema):
    with pytest.raises(TypeError):
        class BadName(SaveMixin):
            _fitted_schema = schema


def test_a_second_class_of_a_registered_name_is_refused(scratch_registry):
    with pytest.raises(TypeError, match="already registered"):
        class RandomFeatureRidge(SaveMixin):  # noqa: F811 - the clash is the point
            _fitted_schema = COMMON
    assert lookup("RandomFeatureRidge") is dxrf.RandomFeatureRidge


def test_the_public_estimators_are_registered():
    public = {n for n in dxrf.__all__ if isinstance(getattr(dxrf, n), type) and hasattr(getattr(dxrf, n), "get_params")}
    assert set(registered()) == public
    assert fitted_schema(dxrf.RandomFeatureRidgeCV)["best_score_"] == "real-or-nan"
    assert lookup(None) is None and lookup("dxrf.RandomFeatureRidge") is None


def test_every_kind_has_a_check():
    for kind in KINDS:
        schema._kind_error(kind, object())  # an unknown kind would raise AssertionError


def test_save_without_an_installed_writer_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(persistable, "_writer", None)
    with pytest.raises(RuntimeError, match="no model writer"):
        dxrf.RandomFourierFeatures(4).save(tmp_path / "m.zarr")


def test_model_format_error_is_one_class_everywhere():
    from dxrf.core.errors import ModelFormatError
    from dxrf.persist.format import ModelFormatError as from_format

    assert dxrf.persist.ModelFormatError is from_format is ModelFormatError
    assert issubclass(ModelFormatError, ValueError)
    assert dxrf.persist.SaveMixin is SaveMixin
