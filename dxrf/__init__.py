"""dxrf: kernel learning with data-dependent random features on Dask.

The core is one pass over chunked data that accumulates small sufficient
statistics of random features (:func:`accumulate`), from which leverage
scores, feature selection and linear models are computed by dense algebra.
"""

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
from dxrf.stats.feature_stats import FeatureStats, accumulate

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
