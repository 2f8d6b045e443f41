"""A fitted feature map reduced to what a worker needs: a small picklable kernel."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from dxrf.core.buffers import thread_buffer
from dxrf.core.device import array_module, is_device_array
from dxrf.core.validation import check_choice, check_subset
from dxrf.kernels import blocks
from dxrf.kernels.landmarks import LANDMARK_KERNELS, gaussian_landmarks, landmark_block

__all__ = ["FeatureKernel", "ACTIVATIONS"]

#: "nystroem-<kernel>": the raw feature j is k(x, l_j) against the landmark l_j = W[:, j]
NYSTROEM = tuple(f"nystroem-{k}" for k in LANDMARK_KERNELS)
#: activations of shift-invariant kernels, which take per-column lengthscales
SHIFT_INVARIANT = ("cos",) + NYSTROEM
ACTIVATIONS = ("cos", "relu", "identity", "maxout") + NYSTROEM

# rows per float64 step of a Nystroem map's rowwise features: about 32 MB of kernel values
_ROWWISE_BYTES = 32 << 20
_ROWWISE_BLOCK_BYTES = 4 << 20  # float64 products of a Fourier map's rowwise features, per block


def _into(values: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``values``, or ``out`` filled with them."""
    if out is None:
        return values
    out[...] = values
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureKernel:
    """The parameters of a fitted feature map, as plain arrays.

    ``z(x)_j = scale_j * phi_j(x)`` where the raw feature ``phi_j`` is a
    projection followed by a pointwise activation (or a max over ``pieces``
    projections). Kernels are what Dask ships to workers: kilobytes to a few
    megabytes, never data.

    A Nyström kernel (activation ``"nystroem-<kernel>"``) has base features
    ``b(x)_i = k(x, l_i)`` against landmarks ``l_i = W[:, i]`` and raw features
    ``phi(x) = b(x) whitening``; the statistics pass accumulates the base
    features' sums and applies ``T = whitening diag(scale)`` to the small
    results (``T^T (sum b b^T) T``), never to a block. Other kernels have no
    whitening: their base features are their raw features.

    Parameters
    ----------
    activation : {"cos", "relu", "identity", "maxout"}
    scale : ndarray of shape (M,), float64
        Per-column scale applied after the activation.
    W : ndarray of shape (d, M * pieces), optional
        Projection matrix in the feature dtype (absent for structured maps).
    b : ndarray of shape (M,), optional
        Phase offsets of Fourier features.
    pieces : int
        Number of pieces of maxout features.
    signs : ndarray of shape (3, n_blocks, p), optional
        Diagonal signs of a structured (SORF) projection used instead of ``W``.
    norms : ndarray of shape (M,), optional
        Chi-distributed norm factors of a structured projection.
    bandwidth : float
        Bandwidth of a structured projection, or of a Nyström map's kernel
        (1 when ``lengthscales`` are set).
    whitening : ndarray of shape (n_base, M), float64, optional
        A Nyström map's ``K_LL^{-1/2}`` (columns selected by :meth:`subset`).
    lengthscales : ndarray of shape (d,), float64, optional
        Per-column lengthscales ``l_j`` of a shift-invariant kernel (Fourier
        ``"cos"`` or Nyström): every block of rows is divided column-wise by
        them where it enters the kernel (:meth:`scale_rows`), so the map is
        exactly the bandwidth-1 map of the rows ``x / l``. Nyström landmarks
        stay stored as rows of X and are compared scaled.
    n_features_in : int
        Input dimension ``d``.
    """

    activation: str
    scale: np.ndarray
    n_features_in: int
    W: np.ndarray | None = None
    b: np.ndarray | None = None
    pieces: int = 1
    signs: np.ndarray | None = None
    norms: np.ndarray | None = None
    bandwidth: float = 1.0
    whitening: np.ndarray | None = None
    lengthscales: np.ndarray | None = None

    def __post_init__(self) -> None:
        check_choice(self.activation, "activation", ACTIVATIONS)
        if self.lengthscales is not None:
            object.__setattr__(self, "lengthscales", self._checked_lengthscales())
        if (self.W is None) == (self.signs is None):
            raise ValueError("exactly one of W and signs must be given")
        if self.whitening is not None:
            if self.activation not in NYSTROEM or self.W is None:
                raise ValueError("only a Nystroem kernel (landmarks in W) has a whitening matrix")
            if self.whitening.shape != (self.W.shape[1], self.scale.shape[0]):
                raise ValueError(
                    f"whitening has shape {self.whitening.shape}; expected {(self.W.shape[1], self.scale.shape[0])} "
                    "(landmarks x features)"
                )
        elif self.activation in NYSTROEM and self.W is not None and self.W.shape[1] != self.scale.shape[0]:
            raise ValueError(f"a Nystroem kernel without whitening needs one scale per landmark, got {self.scale.shape[0]}")

    def _checked_lengthscales(self) -> np.ndarray:
        if self.activation not in SHIFT_INVARIANT:
            raise ValueError(f"lengthscales are for shift-invariant kernels (Fourier or Nystroem), not {self.activation!r}")
        if self.bandwidth != 1.0:
            raise ValueError(f"a kernel with lengthscales has bandwidth 1 (the lengthscales replace it), got {self.bandwidth}")
        ls = np.ascontiguousarray(self.lengthscales, dtype=np.float64)
        if ls.shape != (self.n_features_in,) or not (np.isfinite(ls).all() and (ls > 0).all()):
            raise ValueError(
                f"lengthscales must be {self.n_features_in} positive finite numbers (one per input column), "
                f"got shape {ls.shape}"
            )
        return ls

    # -- shape and type -------------------------------------------------
    @property
    def n_components(self) -> int:
        return int(self.scale.shape[0])

    @property
    def n_base(self) -> int:
        """Width of the base features the statistics pass accumulates (the landmarks of a Nyström map)."""
        return int(self.W.shape[1]) if self.whitening is not None else self.n_components

    @property
    def dtype(self) -> np.dtype:
        return (self.W if self.W is not None else self.signs).dtype

    @property
    def nbytes(self) -> int:
        arrays = (self.scale, self.W, self.b, self.signs, self.norms, self.whitening, self.lengthscales)
        return sum(a.nbytes for a in arrays if a is not None)

    @property
    def effective_bandwidth(self) -> float | np.ndarray:
        """The bandwidth as a map takes it: the lengthscales (float64, shape ``(d,)``) when set, else the number."""
        return self.bandwidth if self.lengthscales is None else self.lengthscales

    @property
    def transform_matrix(self) -> np.ndarray | None:
        """``T = whitening diag(scale)`` (float64): base-feature statistics to feature statistics; None without whitening."""
        if self.whitening is None:
            return None
        if np.all(self.scale == 1):  # a Nyström map's: no M x M copy (read-only for callers)
            return self.whitening
        return self.whitening * self.scale[None, :]

    @functools.cached_property
    def _whitening_dtype(self) -> np.ndarray:
        xp = array_module(self.W)
        return xp.asarray(self.whitening, dtype=self.dtype)

    @functools.cached_property
    def _w_with_offset(self) -> np.ndarray:
        """``W`` with the offsets ``b`` as an extra last row (see ``blocks.fourier_block``)."""
        xp = array_module(self.W)
        return xp.concatenate([self.W, self.b.reshape(1, -1).astype(self.W.dtype)])

    @functools.cached_property
    def _w64(self) -> np.ndarray:
        return self.W.astype(np.float64)

    @functools.cached_property
    def _landmarks64(self) -> np.ndarray:
        """A Nyström map's landmarks in float64, divided by the lengthscales (``W`` itself without them)."""
        if self.lengthscales is None:
            return self._w64
        xp = array_module(self.W)
        return self._w64 / xp.asarray(self.lengthscales)[:, None]

    @functools.cached_property
    def _landmarks(self) -> np.ndarray:
        """A Nyström map's landmarks as its kernel compares them: scaled like the rows, in the kernel dtype."""
        if self.lengthscales is None:
            return self.W
        return self._landmarks64.astype(self.dtype)

    @functools.cached_property
    def _landmarks_augmented(self) -> np.ndarray | None:
        """:func:`~dxrf.kernels.landmarks.gaussian_landmarks` of :attr:`_landmarks` (Gaussian Nyström maps; None for the others), once per map."""
        if self.activation != "nystroem-gaussian" or np.ndim(self.bandwidth) != 0:
            return None
        return gaussian_landmarks(self._landmarks)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for derived in ("_w_with_offset", "_w64", "_whitening_dtype", "_landmarks64", "_landmarks", "_landmarks_augmented"):
            state.pop(derived, None)  # not worth shipping
        return state

    # -- evaluation -----------------------------------------------------
    def _check_rows(self, X: np.ndarray) -> np.ndarray:
        X = X if is_device_array(X) else np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in:
            raise ValueError(f"X has shape {X.shape}; the feature map expects {self.n_features_in} columns")
        return X

    def scale_rows(self, X: np.ndarray) -> np.ndarray:
        """The checked rows ``X`` divided column-wise by the lengthscales (``X`` itself without them).

        The quotient is computed in float64 and rounded once to the kernel
        dtype, into a buffer the thread reuses (valid until its next call):
        exactly what the bandwidth-1 map does with the rows ``X / l`` that
        NumPy computes, so the two maps agree to the bit.
        """
        X = self._check_rows(X)
        if self.lengthscales is None:
            return X
        xp = array_module(X)
        if xp is not np:
            return (X / xp.asarray(self.lengthscales)).astype(self.dtype, copy=False)
        out = thread_buffer("lengthscale-rows", X.shape, self.dtype)
        return np.divide(X, self.lengthscales, out=out)

    def base(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The features the statistics pass accumulates (shape ``(n, n_base)``).

        A Nyström map's kernel values ``k(X, L)`` (the whitening is applied to
        the statistics instead); for every other kernel its raw features.
        """
        return self._base(self.scale_rows(X), out)

    def _base(self, X: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        if self.activation in NYSTROEM:
            return landmark_block(X, self._landmarks, self.activation[len("nystroem-"):], self.bandwidth, out,
                                  self._landmarks_augmented)
        return self._raw(X, out)

    def raw(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Unscaled features of the rows ``X`` (shape ``(n, M)``, kernel dtype).

        ``X`` may be a CuPy array when the kernel's arrays are on the device
        (see :func:`dxrf.core.device.kernel_on`).
        """
        return self._raw(self.scale_rows(X), out)

    def _raw(self, X: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        """:meth:`raw` of rows already checked and scaled."""
        if self.activation in NYSTROEM:
            if self.whitening is None:
                return self._base(X, out)
            xp = array_module(self.W)
            if xp is np:
                K = self._base(X, thread_buffer("nystroem-base", (X.shape[0], self.n_base), self.dtype))
            else:
                K = self._base(X, None)
            if out is None:
                return xp.matmul(K, self._whitening_dtype)
            return xp.matmul(K, self._whitening_dtype, out=out)
        if self.signs is not None:
            out = blocks.sorf_project(X.astype(self.dtype, copy=False), self.signs, self.n_components, self.bandwidth, self.norms, out)
            if self.activation == "cos":
                out += self.b
                blocks.cos_inplace(out)
            return out
        if self.activation == "cos":
            return blocks.fourier_block(X, self.W, self.b, out, Wb=self._w_with_offset)
        if self.activation == "relu":
            return blocks.relu_block(X, self.W, out)
        if self.activation == "maxout":
            return blocks.maxout_block(X, self.W, self.pieces, out)
        return blocks.linear_block(X, self.W, out)

    def __call__(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Scaled features ``z(X)`` (shape ``(n, M)``, kernel dtype)."""
        out = self.raw(X, out)
        out *= self.scale.astype(self.dtype)
        return out

    def rowwise(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Scaled features ``z(X)`` whose every row is independent of the other rows of ``X``.

        A float32 matrix product may round a row by an ulp differently
        depending on where the row falls in BLAS's blocking (edge kernels,
        gemm against gemv), and the cosine amplifies it: ``transform(X)[i]``
        could differ from ``transform(X[i:i+1])``. Here the projection of the
        float32-rounded inputs is computed in float64 and rounded to float32
        once, so it is the same in any company; the activation then runs
        elementwise. ``transform`` and ``predict`` use this; the statistics
        pass keeps the float32 product (its tiles fix the blocking), except a
        small pass, which uses :meth:`base_rowwise`. Float64
        kernels, structured (SORF) kernels and device arrays are evaluated as
        by ``__call__``. ``out``: an ``(n, M)`` array of the kernel dtype to
        fill, else a new one.
        """
        if self.activation in NYSTROEM and not (is_device_array(X) or is_device_array(self.W)):
            return _into(self._nystroem_rowwise(X), out)
        out = self.raw_rowwise(X, out)
        out *= self.scale.astype(out.dtype)
        return out

    def _nystroem_float64(self, X: np.ndarray, whiten: bool) -> np.ndarray:
        """A float32 Nyström map's kernel values (whitened or not) from float64, rounded once; else as computed."""
        if self.dtype != np.float32 or is_device_array(X) or is_device_array(self.W):
            return self.raw(X) if whiten else self.base(X)
        X = self.scale_rows(X)
        K = landmark_block(X.astype(np.float32, copy=False), self._landmarks64, self.activation[len("nystroem-"):], self.bandwidth)
        return (K @ self.whitening if whiten and self.whitening is not None else K).astype(np.float32)

    def base_rowwise(self, X: np.ndarray) -> np.ndarray:
        """:meth:`base` features whose every row is independent of the other rows of ``X``.

        As :meth:`rowwise`, without the scale: a float32 projection (or a
        Nyström map's kernel values, which ``predict`` evaluates the same
        way) computed in float64 and rounded once. The statistics pass uses
        these when it accumulates float32 features' products in float64
        (:func:`dxrf.stats.tiles.wide_products`), so its statistics are
        those of the features ``transform`` makes, before their scaling.
        """
        if self.activation in NYSTROEM:
            return self._nystroem_float64(X, whiten=False)
        return self.raw_rowwise(X)

    def raw_rowwise(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`raw` features whose every row is independent of the other rows of ``X``.

        :meth:`rowwise` without the scale (a Nyström map's whitened kernel
        values computed in float64 and rounded once); the logistic passes of
        a small fit and the SGD passes use these. ``out``: an ``(n, M)``
        array of the kernel dtype to fill (float32 Fourier, ReLU and maxout
        maps), else a new one.
        """
        if self.activation in NYSTROEM:
            return _into(self._nystroem_float64(X, whiten=True), out)
        if self.dtype != np.float32 or self.W is None or is_device_array(X) or is_device_array(self.W):
            return self.raw(X, out)
        X = self.scale_rows(np.asarray(X))
        n, m = X.shape[0], self.n_components
        out = np.empty((n, m), dtype=np.float32) if out is None else out
        width = self.W.shape[1]
        # float64 products of a few MB: they stay in cache between the product, the offset and the rounding
        rows = max(64, _ROWWISE_BLOCK_BYTES // (8 * width))
        P_all = thread_buffer("rowwise-products", (min(rows, max(n, 1)), width), np.float64)
        for lo in range(0, n, rows):
            P = np.matmul(X[lo : lo + rows].astype(np.float32, copy=False).astype(np.float64), self._w64,
                          out=P_all[: min(rows, n - lo)])
            if self.activation == "cos":
                P += self.b
            if self.activation == "maxout" and self.pieces > 1:
                # rounding is monotone: the maximum of the float64 values rounds to the maximum of the rounded ones
                P = P.reshape(P.shape[0], m, self.pieces).max(axis=2)
            np.copyto(out[lo : lo + rows], P, casting="same_kind")  # rounded to float32 once
        if self.activation == "cos":
            blocks.cos_inplace(out)
        elif self.activation == "relu":
            np.maximum(out, 0, out=out)
        return out

    def _nystroem_rowwise(self, X: np.ndarray) -> np.ndarray:
        """Nyström features in float64 (landmarks as stored), rounded once to the kernel dtype."""
        X = self.scale_rows(X)
        n, m = X.shape[0], self.n_components
        out = np.empty((n, m), dtype=self.dtype)
        kind = self.activation[len("nystroem-"):]
        rows = max(256, _ROWWISE_BYTES // (8 * max(self.n_base, m)))
        for lo in range(0, n, rows):
            K = landmark_block(X[lo : lo + rows].astype(self.dtype, copy=False), self._landmarks64, kind, self.bandwidth)
            Z = K if self.whitening is None else K @ self.whitening
            Z *= self.scale
            out[lo : lo + rows] = Z
        return out

    # -- derived kernels ------------------------------------------------
    def dense(self) -> FeatureKernel:
        """An equivalent kernel with an explicit projection matrix ``W``."""
        if self.W is not None:
            return self
        eye = np.eye(self.n_features_in, dtype=np.float64)
        norms = None if self.norms is None else self.norms.astype(np.float64)
        W = blocks.sorf_project(eye, self.signs.astype(np.float64), self.n_components, self.bandwidth, norms)
        return dataclasses.replace(self, W=W.astype(self.dtype), signs=None, norms=None)

    def subset(self, index: np.ndarray, scales: np.ndarray | None = None) -> FeatureKernel:
        """Kernel of the columns ``index`` (repetitions allowed), rescaled.

        The new column ``j`` is ``scales[j] * z_{index[j]}``.
        """
        index, scales = check_subset(index, scales, self.n_components)
        if self.activation in NYSTROEM:
            # a Nyström feature is a column of the whitening: the landmarks stay
            whitening = np.eye(self.n_base) if self.whitening is None else self.whitening
            return dataclasses.replace(
                self, whitening=np.ascontiguousarray(whitening[:, index]), scale=self.scale[index] * scales
            )
        base = self.dense()
        q = base.pieces
        W = base.W.reshape(base.n_features_in, -1, q)[:, index, :].reshape(base.n_features_in, -1)
        return dataclasses.replace(
            base,
            W=np.ascontiguousarray(W),
            b=None if base.b is None else base.b[index].copy(),
            scale=base.scale[index] * scales,
        )

    def astype(self, dtype: np.dtype | str) -> FeatureKernel:
        """The same kernel evaluated in another floating dtype."""
        dtype = np.dtype(dtype)
        cast = lambda a: None if a is None else a.astype(dtype)  # noqa: E731
        return dataclasses.replace(self, W=cast(self.W), b=cast(self.b), signs=cast(self.signs), norms=cast(self.norms))

    def __dask_tokenize__(self) -> tuple:
        from dask.base import tokenize

        return (
            "dxrf.FeatureKernel",
            self.activation,
            self.n_features_in,
            self.pieces,
            self.bandwidth,
            tokenize(self.scale, self.W, self.b, self.signs, self.norms, self.whitening, self.lengthscales),
        )
