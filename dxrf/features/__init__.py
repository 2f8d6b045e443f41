"""Random feature maps: samplers of omega, pure block kernels, and transformers."""

from . import blocks, exact, samplers
from .kernel import FeatureKernel
from .nystroem import NystroemFeatures
from .maps import (
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
    "FOURIER_KERNELS",
    "SAMPLINGS",
]
