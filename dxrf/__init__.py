"""dxrf: kernel learning with data-dependent random features on Dask.

The core is one pass over chunked data that accumulates small sufficient
statistics of random features (:func:`accumulate`), from which leverage
scores, feature selection and linear models are computed by dense algebra.
"""

import importlib as _importlib
import sys as _sys
import types as _types
import warnings as _warnings

from dxrf.features import (
    FeatureKernel,
    NystroemFeatures,
    RandomFourierFeatures,
    RandomLinearSketch,
    RandomMaxoutFeatures,
    RandomReLUFeatures,
)
from dxrf.learners import (
    RandomFeatureClassifier,
    RandomFeatureClassifierCV,
    RandomFeaturePCA,
    RandomFeatureRidge,
    RandomFeatureRidgeCV,
    RandomFeatureSGDClassifier,
    RandomFeatureSGDRegressor,
)
from dxrf.core.options import get_options, options, set_options
from dxrf.core.version import __version__
from dxrf.persist.format import load, save
from dxrf.selection import (
    EnergyScoreSelector,
    KernelAlignmentSelector,
    LeverageScoreSampler,
    degrees_of_freedom,
    gram_spectrum,
    leverage_diagnostics,
    leverage_scores,
    select_features,
    suggested_n_components,
)
from dxrf.stats.scoring import LinearModels, ModelScores, score_models
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate

# Public module paths of earlier releases, now in the layered packages. Each old path
# is a stand-in module that forwards attribute access to the new one with a
# DeprecationWarning; it is registered without being set as an attribute of its
# parent, so `dxrf.options` stays the context manager.
_MOVED_MODULES = {
    "dxrf.options": "dxrf.core.options",
    "dxrf.progress": "dxrf.core.progress",
    "dxrf.stats_tiles": "dxrf.stats.tiles",
    "dxrf.compensated": "dxrf.stats.compensated",
    "dxrf.scoring": "dxrf.stats.scoring",
    "dxrf.persist_schema": "dxrf.persist.schema",
    "dxrf.cli_models": "dxrf.cli.models",
    "dxrf.cli_data": "dxrf.cli.data",
    "dxrf.data_cache": "dxrf.datasets.cache",
    "dxrf.data_recipes": "dxrf.datasets.recipes",
    "dxrf.learners.ridge_path": "dxrf.solvers.ridge_path",
    "dxrf.learners.landmark_solve": "dxrf.solvers.landmark_solve",
    "dxrf.learners.sgd_passes": "dxrf.solvers.sgd_passes",
    "dxrf.learners.cv_splits": "dxrf.search.cv_splits",
    "dxrf.learners.logistic": "dxrf.solvers.logistic",
    "dxrf.features.kernel": "dxrf.kernels.kernel",
    "dxrf.features.blocks": "dxrf.kernels.blocks",
    "dxrf.features.exact": "dxrf.kernels.exact",
    "dxrf.features.landmarks": "dxrf.kernels.landmarks",
    **{
        f"dxrf.learners.logistic.{name}": f"dxrf.solvers.logistic.{name}"
        for name in ("batching", "fit", "lbfgs", "multinomial", "newton", "newton_cg", "objective", "passes",
                     "sample", "softmax", "sums")
    },
}


class _MovedModule(_types.ModuleType):
    """An old module path: forwards attribute access to the module's new place, with a warning."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Deprecated alias of :mod:`{new}`.")
        self.__dict__["_new_name"] = new

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        new = self.__dict__["_new_name"]
        _warnings.warn(f"{self.__name__} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return getattr(_importlib.import_module(new), name)

    def __dir__(self) -> list[str]:
        return dir(_importlib.import_module(self.__dict__["_new_name"]))


for _old, _new in _MOVED_MODULES.items():
    _sys.modules.setdefault(_old, _MovedModule(_old, _new))
del _old, _new

__all__ = [
    "FeatureKernel",
    "FeatureStats",
    "NystroemFeatures",
    "RandomFourierFeatures",
    "RandomLinearSketch",
    "RandomMaxoutFeatures",
    "RandomReLUFeatures",
    "accumulate",
    "LinearModels",
    "ModelScores",
    "score_models",
    "RandomFeatureRidge",
    "RandomFeatureClassifier",
    "RandomFeatureRidgeCV",
    "RandomFeatureClassifierCV",
    "RandomFeatureSGDRegressor",
    "RandomFeatureSGDClassifier",
    "RandomFeaturePCA",
    "LeverageScoreSampler",
    "EnergyScoreSelector",
    "KernelAlignmentSelector",
    "leverage_scores",
    "degrees_of_freedom",
    "suggested_n_components",
    "leverage_diagnostics",
    "gram_spectrum",
    "select_features",
    "get_options",
    "load",
    "save",
    "options",
    "set_options",
    "__version__",
]
