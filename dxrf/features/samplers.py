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
    "median_distance",
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


def median_distance(
    X: np.ndarray, metric: str = "euclidean", sample_weight: np.ndarray | None = None, self_fraction: float = 1.0
) -> float:
    """Median of the pairwise distances between distinct rows of ``X``, optionally weighted.

    With ``sample_weight`` the median is that of the distances between all
    copies of the rows when row ``i`` stands for ``w_i`` copies: the pair
    ``(i, j)`` weighs ``w_i w_j`` and the pairs among a row's own copies (at
    distance 0) weigh ``C(w_i, 2) = w_i (w_i - 1) / 2`` (0 when ``w_i < 1``),
    so integer weights give exactly the median of the rows repeated
    (:func:`numpy.median`, the two middle values averaged when the total
    weight is even), and a row of weight 0 takes no part. ``self_fraction``
    multiplies the copies' own pairs: ``(s - 1) / (N - 1)`` when ``X`` is a
    uniform sample of ``s`` of ``N`` rows, which keeps every pair's weight
    unbiased (a row's own pairs enter with the row, a pair of rows with both).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    metric : str, default "euclidean"
        A metric of :func:`scipy.spatial.distance.pdist`.
    sample_weight : array-like of shape (n_samples,), optional
    self_fraction : float, default 1.0

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Fewer than 2 rows, or a median of 0.
    """
    from scipy.spatial.distance import pdist

    X = np.asarray(X, dtype=np.float64)
    if sample_weight is None:
        if X.shape[0] < 2:
            raise ValueError(f"the median bandwidth needs at least 2 rows, got n_samples={X.shape[0]}")
        med = float(np.median(pdist(X, metric=metric)))
    else:
        med = _weighted_median(*weighted_pairs(X, np.asarray(sample_weight, dtype=np.float64), metric, self_fraction))
    if not np.isfinite(med) or med <= 0:
        raise ValueError(
            "the median pairwise distance of the sample is 0 (constant or duplicated rows); give a numeric bandwidth"
        )
    return med


def weighted_pairs(
    X: np.ndarray, w: np.ndarray, metric: str = "euclidean", self_fraction: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and weights of :func:`median_distance`'s pairs: first the copies' own pairs (at 0), then pdist's.

    Rows of weight 0 are left out.
    """
    from scipy.spatial.distance import pdist

    keep = w > 0
    X, w = X[keep], w[keep]
    # pdist's order of pairs, (0, 1), (0, 2), ..., without an index array per pair
    pairs = [w[i] * w[i + 1 :] for i in range(w.size - 1)]
    dist = np.concatenate([[0.0], pdist(X, metric=metric)])
    return dist, np.concatenate([[self_fraction * np.maximum(w * (w - 1) / 2, 0).sum()], *pairs])


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The median of ``values`` each counted ``weights`` times: :func:`numpy.median` of the repeats for integers.

    The mean of the smallest value whose cumulative weight reaches half the
    total and the smallest whose cumulative weight passes it (one value when
    the total is odd, the two middle ones when it is even).
    """
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        raise ValueError("the median bandwidth needs two rows of positive weight (or one of weight 2 or more)")
    order = np.argsort(values, kind="stable")
    values, cum = values[order], np.cumsum(weights[order])
    half = cum[-1] / 2
    lo, hi = values[np.searchsorted(cum, half, side="left")], values[np.searchsorted(cum, half, side="right")]
    return float(np.mean([lo, hi]))
