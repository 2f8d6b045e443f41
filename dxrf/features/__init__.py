"""Random feature maps: samplers of omega, pure block kernels, and transformers."""

from dxrf.features import blocks, exact, samplers
from dxrf.features.kernel import FeatureKernel
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
