"""Data-dependent selection of random features from one-pass statistics.

ELSS (empirical leverage scores, Algorithms 1 and 2 of Shahrampour & Kolouri),
the leverage-weighted RFF convention of Li, Ton, Oglic & Sejdinovic, EERF
(Shahrampour, Beirami & Tarokh) and LKRF (Sinha & Duchi). Everything is dense
algebra on the candidates' :class:`dxrf.FeatureStats`; selection never
re-reads the data.
"""

from dxrf.selection.leverage import (
    LAM_CONVENTIONS,
    GramSpectrum,
    LeverageDiagnostics,
    client_threads,
    degrees_of_freedom,
    gram_spectrum,
    leverage_diagnostics,
    leverage_scores,
    suggested_n_components,
)
from dxrf.selection.lkrf import chi2_divergence, lkrf_weights, project_simplex
from dxrf.selection.select import (
    CRITERIA,
    METHODS,
    Selection,
    alignment_scores,
    draw_features,
    energy_scores,
    select_features,
    target_cross,
)
from dxrf.selection.selectors import (
    TASKS,
    EnergyScoreSelector,
    KernelAlignmentSelector,
    LeverageScoreSampler,
)

__all__ = [
    "LeverageScoreSampler",
    "EnergyScoreSelector",
    "KernelAlignmentSelector",
    "leverage_scores",
    "client_threads",
    "degrees_of_freedom",
    "suggested_n_components",
    "leverage_diagnostics",
    "LeverageDiagnostics",
    "gram_spectrum",
    "GramSpectrum",
    "select_features",
    "Selection",
    "draw_features",
    "energy_scores",
    "alignment_scores",
    "target_cross",
    "project_simplex",
    "lkrf_weights",
    "chi2_divergence",
    "LAM_CONVENTIONS",
    "CRITERIA",
    "METHODS",
    "TASKS",
]
