"""Sufficient statistics of random features, accumulated in one pass.

:class:`FeatureStats` holds ZᵀZ, Zᵀy and sums; :func:`accumulate` runs the
statistics pass (:mod:`dxrf.stats.tiles`) through the engine with compensated
partial sums (:mod:`dxrf.stats.compensated`); :func:`score_models` scores many
linear models in one pass (:mod:`dxrf.stats.scoring`).
"""

from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate, block_stats, hashed_split, resolve_kernel
from dxrf.stats.scoring import LinearModels, ModelScores, score_models
from dxrf.stats.tiles import tile_timings

__all__ = [
    "FeatureStats",
    "accumulate",
    "block_stats",
    "hashed_split",
    "resolve_kernel",
    "LinearModels",
    "ModelScores",
    "score_models",
    "tile_timings",
]
