"""dxrf: kernel learning with data-dependent random features on Dask.

The core is one pass over chunked data that accumulates small sufficient
statistics of random features (:func:`accumulate`), from which leverage
scores, feature selection and linear models are computed by dense algebra.
"""

from .features import (
    FeatureKernel,
    RandomFourierFeatures,
    RandomLinearSketch,
    RandomMaxoutFeatures,
    RandomReLUFeatures,
)
from .options import get_options, options, set_options
from .stats import FeatureStats, accumulate

__version__ = "0.1.0"

__all__ = [
    "FeatureKernel",
    "FeatureStats",
    "RandomFourierFeatures",
    "RandomLinearSketch",
    "RandomMaxoutFeatures",
    "RandomReLUFeatures",
    "accumulate",
    "get_options",
    "options",
    "set_options",
    "__version__",
]
