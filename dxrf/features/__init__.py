"""Random feature maps as scikit-learn transformers, and the samplers of their frequencies.

The shipped kernels and pure block kernels they use are in :mod:`dxrf.kernels`.
"""

from dxrf.features import samplers
from dxrf.kernels import blocks, exact
from dxrf.kernels.kernel import FeatureKernel
from dxrf.features.samplers import median_distance
from dxrf.features.nystroem import NystroemFeatures
from dxrf.features.maps import (
    FOURIER_KERNELS,
    SAMPLINGS,
    BaseRandomFeatures,
    RandomFourierFeatures,
    RandomLinearSketch,
    RandomMaxoutFeatures,
    RandomReLUFeatures,
    apply_kernel,
)

__all__ = [
    "blocks",
    "exact",
    "samplers",
    "FeatureKernel",
    "NystroemFeatures",
    "BaseRandomFeatures",
    "RandomFourierFeatures",
    "RandomReLUFeatures",
    "RandomLinearSketch",
    "RandomMaxoutFeatures",
    "apply_kernel",
    "median_distance",
    "FOURIER_KERNELS",
    "SAMPLINGS",
]
