"""The model search's algebra: its grid, the validation of every configuration, its results.

The estimators that run it are :class:`dxrf.RandomFeatureRidgeCV` and
:class:`dxrf.RandomFeatureClassifierCV` (:mod:`dxrf.learners.search_cv`).
"""

from .evaluate import GridErrors, fold_pairs, prefix, r2_scores, select_largest, validate_grid
from .landmarks import landmark_subset, validate_landmarks
from .grid import SELECTIONS, BandwidthSpec, SearchGrid, Variant, check_grid, parse_bandwidth
from .results import best_index, format_table, results_table, warn_at_edges

__all__ = [
    "SELECTIONS",
    "BandwidthSpec",
    "SearchGrid",
    "Variant",
    "check_grid",
    "parse_bandwidth",
    "GridErrors",
    "fold_pairs",
    "prefix",
    "r2_scores",
    "select_largest",
    "validate_grid",
    "landmark_subset",
    "validate_landmarks",
    "best_index",
    "format_table",
    "results_table",
    "warn_at_edges",
]
