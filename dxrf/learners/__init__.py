"""Learners on random features: solves on accumulated statistics and iterative passes."""

from dxrf.learners._base import RandomFeatureModel, linear_predict
from dxrf.learners.classifier import RandomFeatureClassifier
from dxrf.learners.pca import RandomFeaturePCA
from dxrf.learners.ridge import RandomFeatureRidge
from dxrf.solvers.ridge_path import RidgePath, mse_from_stats, ridge_path, solve_ridge
from dxrf.learners.search_cv import RandomFeatureClassifierCV, RandomFeatureRidgeCV, stacked_models
from dxrf.learners.sgd import RandomFeatureSGDClassifier, RandomFeatureSGDRegressor

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
    "stacked_models",
]
