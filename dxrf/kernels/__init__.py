"""Shipped kernels and pure block kernels: what a pass evaluates on a block of rows.

:class:`FeatureKernel` is the picklable feature map a pass ships to the workers
(:mod:`.kernel`); :mod:`.blocks` holds the NumPy/CuPy block kernels of the random
feature maps, :mod:`.landmarks` the kernel blocks against Nyström landmarks, their
whitenings and the landmark race pass, and :mod:`.exact` the exact kernels they
approximate; :mod:`.gp` the exact GP evidence whose maximum gives per-column
lengthscales (``bandwidth="ard"``). They sit below the statistics pass, which evaluates them, and below
the feature-map transformers, whose fits may run a statistics pass.
"""

from dxrf.kernels import blocks, exact, gp, landmarks
from dxrf.kernels.kernel import FeatureKernel

__all__ = ["FeatureKernel", "blocks", "exact", "gp", "landmarks"]
