"""Learners on random features: solves on accumulated statistics and iterative passes."""

from ._base import RandomFeatureModel, linear_predict
from .classifier import RandomFeatureClassifier
from .pca import RandomFeaturePCA
from .ridge import RandomFeatureRidge
from .ridge_path import RidgePath, mse_from_stats, ridge_path, solve_ridge
from .search_cv import RandomFeatureClassifierCV, RandomFeatureRidgeCV
from .sgd import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor

__all__ = [
    "RandomFeatureModel",
    "RandomFeatureRidge",
    "RandomFeatureClassifier",
    "RandomFeatureRidgeCV",
    "RandomFeatureClassifierCV",
    "RandomFeatureSGDRegressor",
    "RandomFeatureSGDClassifier",
    "RandomFeaturePCA",
    "RidgePath",
    "ridge_path",
    "solve_ridge",
    "mse_from_stats",
    "linear_predict",
]
