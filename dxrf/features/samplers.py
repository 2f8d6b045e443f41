"""Samplers of the random parameters (omega) of feature maps.

Each function draws from a ``numpy.random.Generator`` and returns float64
arrays with the frequencies as *columns*: ``W`` has shape ``(d, M)`` so that
the projection of a block of rows is ``X @ W``.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats
from scipy.stats import qmc

__all__ = [
    "SPECTRAL_LAWS",
    "iid_frequencies",
    "orthogonal_frequencies",
    "qmc_frequencies",
    "structured_signs",
    "SORF_MIN_ORDER",
    "uniform_offsets",
]

# Spectral law of each shift-invariant kernel, as a scipy distribution of one
# coordinate of w for unit bandwidth (Bochner's theorem):
#   gaussian  exp(-|x-x'|^2 / 2 s^2)        -> w_j ~ N(0, 1/s^2)
#   laplacian exp(-|x-x'|_1 / s)            -> w_j ~ Cauchy(0, 1/s)
#   cauchy    prod_j 1/(1 + (x_j-x'_j)^2/s^2) -> w_j ~ Laplace(0, 1/s)
SPECTRAL_LAWS = {
    "gaussian": stats.norm,
    "laplacian": stats.cauchy,
    "cauchy": stats.laplace,
}


def iid_frequencies(rng: np.random.Generator, kernel: str, d: int, m: int, bandwidth: float) -> np.ndarray:
    """Monte Carlo frequencies: every entry i.i.d. from the spectral law."""
    if kernel == "gaussian":
        W = rng.standard_normal((d, m))
    elif kernel == "laplacian":
        W = rng.standard_cauchy((d, m))
    elif kernel == "cauchy":
        W = rng.laplace(0.0, 1.0, (d, m))
    else:
        raise ValueError(f"unknown kernel {kernel!r}")
    return W / bandwidth


def orthogonal_frequencies(rng: np.random.Generator, d: int, m: int, bandwidth: float) -> np.ndarray:
    """Orthogonal random features (Yu et al., 2016) for the Gaussian kernel.

    Blocks of ``d`` frequencies ``S Q / sigma``: ``Q`` a Haar-random orthogonal
    matrix (QR of a Gaussian matrix with the signs of ``diag(R)`` fixed), ``S``
    the norms of independent Gaussian vectors (chi with ``d`` degrees of freedom),
    so each frequency is marginally ``N(0, I/sigma^2)`` but those of one block
    are exactly orthogonal.
    """
    blocks = []
    for _ in range(-(-m // d)):
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q *= np.sign(np.diag(R))
        norms = np.sqrt(rng.chisquare(d, size=d))
        blocks.append(Q * norms)
    return np.hstack(blocks)[:, :m] / bandwidth


def qmc_frequencies(
    rng: np.random.Generator, kernel: str, d: int, m: int, bandwidth: float
) -> tuple[np.ndarray, np.ndarray]:
    """Quasi-Monte Carlo frequencies and offsets (Avron et al., 2016).

    Scrambled Sobol points ``u`` in ``(0, 1)^(d+1)``: the first ``d`` coordinates
    go through the inverse CDF of the spectral law, the last gives ``b = 2 pi u``.
    """
    if d + 1 > qmc.Sobol.MAXDIM:
        raise ValueError(f"qmc sampling supports at most {qmc.Sobol.MAXDIM - 1} input columns, got {d}")
    sobol = qmc.Sobol(d + 1, scramble=True, rng=rng)
    with warnings.catch_warnings():
        # a prefix of a scrambled Sobol sequence is still low-discrepancy when M is not a power of two
        warnings.filterwarnings("ignore", message=".*balance properties.*")
        u = sobol.random(m)
    tiny = np.finfo(np.float64).eps
    u = np.clip(u, tiny, 1.0 - tiny)
    W = SPECTRAL_LAWS[kernel].ppf(u[:, :d]).T / bandwidth
    b = 2.0 * np.pi * u[:, d]
    return np.ascontiguousarray(W), b


SORF_MIN_ORDER = 32  # smallest Hadamard order of structured features (see structured_signs)


def structured_signs(rng: np.random.Generator, d: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Random +-1 diagonals ``D1, D2, D3`` and norm factors for structured features.

    Returns the signs, shape ``(3, n_blocks, p)`` with ``p`` the smallest power
    of two >= ``max(d, SORF_MIN_ORDER)`` and ``n_blocks = ceil(m / p)``, and
    ``m`` factors ``chi_p / sqrt(p)`` that give each frequency the norm
    distribution of a Gaussian vector (as ORF does with its ``S``).

    Small orders are padded up to ``SORF_MIN_ORDER``: the rows of
    ``H D1 H D2 H D3`` take only a few directions when ``p`` is small (4 for
    ``p = 2``), so the kernel estimate keeps a bias however large ``M`` is
    (measured MSE floors at M = 65536: 8e-3 for d = 2, 3e-4 for d = 4, 2e-5 for
    d = 5, against 1e-5 for i.i.d. features). With ``p >= 32`` the first ``d``
    coordinates of a row are close to Gaussian and no floor is measurable.
    """
    p = 1 << max(0, int(max(d, SORF_MIN_ORDER) - 1).bit_length())
    n_blocks = -(-m // p)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(3, n_blocks, p))
    norms = np.sqrt(rng.chisquare(p, size=m) / p)
    return signs, norms


def uniform_offsets(rng: np.random.Generator, m: int) -> np.ndarray:
    """Phase offsets ``b ~ U[0, 2 pi)``."""
    return rng.uniform(0.0, 2.0 * np.pi, m)


def median_distance(X: np.ndarray, metric: str = "euclidean") -> float:
    """Median of the pairwise distances between distinct rows of ``X``."""
    from scipy.spatial.distance import pdist

    if X.shape[0] < 2:
        raise ValueError(f"the median bandwidth needs at least 2 rows, got n_samples={X.shape[0]}")
    dist = pdist(np.asarray(X, dtype=np.float64), metric=metric)
    med = float(np.median(dist))
    if not np.isfinite(med) or med <= 0:
        raise ValueError(
            "the median pairwise distance of the sample is 0 (constant or duplicated rows); give a numeric bandwidth"
        )
    return med
