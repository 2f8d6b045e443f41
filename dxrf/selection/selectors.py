"""Data-dependent random feature selectors as scikit-learn transformers.

Each selector draws ``M0`` candidate features from a base feature map, makes
ONE pass over the data to accumulate the candidates' statistics
(:func:`dxrf.accumulate`: Gram, and the cross statistic with targets), and
selects ``M`` of them by dense algebra on those statistics
(:func:`dxrf.selection.select_features`). The fitted selector is a feature
map: ``transform`` evaluates the selected, rescaled candidates lazily on dask
input. Its ``candidate_stats_`` and ``stats_`` let learners fit on the
candidates or on the selection without another pass.

The shared machinery is in ``base_selector``, the unsupervised selector in
``leverage_sampler`` and the supervised ones in ``supervised``; their names
stay importable from here.
"""

from __future__ import annotations

# the selectors' modules; every name of the former single module stays importable from here
from dxrf.selection.base_selector import _DRAW_SALT, _ROWS_SALT, TASKS, _BaseSelector, _split_random_state
from dxrf.selection.leverage_sampler import LeverageScoreSampler
from dxrf.selection.supervised import EnergyScoreSelector, KernelAlignmentSelector, _prepare_targets, _SupervisedSelector

__all__ = ["LeverageScoreSampler", "EnergyScoreSelector", "KernelAlignmentSelector", "TASKS"]
