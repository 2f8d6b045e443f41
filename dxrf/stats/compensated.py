"""Compensated (double-double) sums: totals that do not depend on the order of their adds.

Every pass adds float32 or float64 tiles into ``hi + lo`` pairs with
error-free transformations (Knuth's TwoSum). The final ``hi + lo`` is the
exact sum rounded once, so statistics and scores are bitwise identical across
chunkings, lanes and worker counts (given tiles on a global grid of rows).
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from dxrf.core.buffers import thread_buffer
from dxrf.core.device import array_module, to_host
from dxrf.stats.feature_stats import FeatureStats

__all__ = ["CompensatedSums", "compensated_add", "packed_size"]

# Rows of the Gram per band of the compensated sums: the band's four temporaries
# stay small (1 MiB at M = 500, 4 MiB at 2000); measured 20% faster than 256 rows
# at M = 2000. It also fixes the packed layout of the Gram's sums.
_SUM_ROWS = 64


@functools.lru_cache(maxsize=32)
def _gram_bands(m: int) -> tuple[tuple[int, int, int], ...]:
    """``(r0, r1, offset)`` of each band of :class:`CompensatedSums`' packed Gram.

    Band ``[r0, r1)`` holds rows ``r0:r1``, columns ``r0:m`` of the Gram (the
    upper triangle plus the lower half of its diagonal block), stored
    row-major from ``offset`` of one flat array: about ``m (m + _SUM_ROWS) / 2``
    numbers instead of ``m^2``.
    """
    out, off = [], 0
    for r0 in range(0, m, _SUM_ROWS):
        r1 = min(r0 + _SUM_ROWS, m)
        out.append((r0, r1, off))
        off += (r1 - r0) * (m - r0)
    return tuple(out)


def packed_size(m: int) -> int:
    r0, r1, off = _gram_bands(m)[-1] if m else (0, 0, 0)
    return off + (r1 - r0) * (m - r0)


class CompensatedSums:
    """Compensated (double-double) running sums of the statistics of one group of rows.

    Every tile contributes its float32 (or float64) Gram, feature sum, cross
    products and target moments; they are added into ``hi + lo`` pairs with
    error-free transformations. The final ``hi + lo`` is the exact sum rounded
    once, so it does not depend on the order in which tiles and partial sums
    are added: the statistics are bitwise identical across chunkings and
    worker counts (tiles themselves follow a global grid of row indices).

    The Gram's sums keep only its upper triangle, in row bands packed into one
    flat array (:func:`_gram_bands`): the running sums and every partial a pass
    ships or holds take about ``8 M^2`` bytes instead of ``16 M^2``.
    """

    def __init__(self, m: int, k: int | None, xp: ModuleType = np, weighted: bool = False) -> None:
        self.n = 0
        self.m = m
        self.k = k
        self.xp = xp
        self.hi = {"gram": xp.zeros(packed_size(m)), "sum": xp.zeros(m)}
        if weighted:
            # the rows' total weight, compensated too: it is the statistics' n
            self.hi["wsum"] = xp.zeros(1)
        if k is not None:
            self.hi.update(cross=xp.zeros((m, k)), ysum=xp.zeros(k), yy=xp.zeros((k, k)))
        self.lo = {key: xp.zeros_like(v) for key, v in self.hi.items()}

    def __sizeof__(self) -> int:
        # what dask's sizeof sees: the scheduler weighs a lane's running partial against
        # the chunk it meets, and a worker's memory manager counts the partials it holds
        return object.__sizeof__(self) + sum(int(v.nbytes) for part in (self.hi, self.lo) for v in part.values())

    def __getstate__(self) -> dict:
        # device sums travel (between workers, or to disk) as host sums; a lane that
        # meets them again on a device moves them back (:meth:`on`)
        state = dict(self.to_host().__dict__)
        del state["xp"]  # modules do not pickle
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, xp=np)

    def on(self, xp: ModuleType) -> CompensatedSums:
        """These sums with their arrays on the array module ``xp`` (themselves when already there)."""
        if xp is self.xp:
            return self
        move = to_host if xp is np else xp.asarray
        moved = CompensatedSums.__new__(CompensatedSums)
        moved.__dict__.update(self.__dict__, xp=xp)
        moved.hi = {key: move(v) for key, v in self.hi.items()}
        moved.lo = {key: move(v) for key, v in self.lo.items()}
        return moved

    def to_host(self) -> CompensatedSums:
        """These sums with every array copied to host memory (NumPy)."""
        return self.on(np)

    def _scratch(self, shape: tuple[int, ...]) -> np.ndarray | None:
        if self.xp is not np:  # the device's add is one fused kernel: no temporaries
            return None
        size = 4 * int(np.prod(shape))
        # one flat array serves every shape: sized for the largest band at once
        buf = thread_buffer("sums", (max(size, 4 * _SUM_ROWS * self.m),), np.dtype(np.float64))
        return buf[:size].reshape((4,) + shape)

    def _band(self, flat: np.ndarray, r0: int, r1: int, off: int) -> np.ndarray:
        return flat[off : off + (r1 - r0) * (self.m - r0)].reshape(r1 - r0, self.m - r0)

    def add(self, key: str, x: np.ndarray) -> None:
        hi, lo = self.hi[key], self.lo[key]
        xp = array_module(hi)
        if key == "gram" and xp is not np:
            # a device: the whole packed triangle in one launch (a launch per band
            # cost 0.83 ms of a 1.9 ms tile at M = 2000 on an H100)
            m = self.m
            _device_packed_two_sum(xp)(xp.ascontiguousarray(x).reshape(-1), m, _SUM_ROWS, hi, lo, size=m * m)
            return
        if key == "gram":
            # upper triangle only, a band of rows at a time
            for r0, r1, off in _gram_bands(self.m):
                hb, lb = self._band(hi, r0, r1, off), self._band(lo, r0, r1, off)
                compensated_add(hb, lb, x[r0:r1, r0:], self._scratch(hb.shape))
        else:
            compensated_add(hi, lo, x, self._scratch(hi.shape))

    def merge(self, other: CompensatedSums) -> CompensatedSums:
        """Add ``other`` into these sums (in place; ``other`` is moved to their array module first)."""
        other = other.on(self.xp)
        self.n += other.n
        step = _SUM_ROWS * max(self.m, 1)  # elementwise: any cache-sized pieces will do
        for key in self.hi:
            hi, lo = self.hi[key].reshape(-1), self.lo[key].reshape(-1)
            ohi, olo = other.hi[key].reshape(-1), other.lo[key].reshape(-1)
            for a in range(0, hi.size, step):
                b = min(a + step, hi.size)
                compensated_add(hi[a:b], lo[a:b], ohi[a:b], self._scratch((b - a,)))
                lo[a:b] += olo[a:b]
        return self

    def finish(self, scale: np.ndarray, transform: np.ndarray | None = None) -> FeatureStats:
        """The statistics of ``z = b diag(scale)``, or ``z = b T`` with ``transform`` ``T`` (a Nyström whitening).

        The sums are of the base features ``b``; the transform applies to
        the small results (``T^T G T``), never to a block. Device sums are
        copied to the host first: statistics are finished there.
        """
        if self.xp is not np:
            return self.to_host().finish(scale, transform)
        total = {key: self.hi[key] + self.lo[key] for key in self.hi if key != "gram"}
        m = self.m
        gram = np.empty((m, m))
        bands = _gram_bands(m)
        for r0, r1, off in bands:
            np.add(self._band(self.hi["gram"], r0, r1, off), self._band(self.lo["gram"], r0, r1, off),
                   out=gram[r0:r1, r0:])
        # mirror the upper triangle and scale, a band at a time: no M x M temporaries
        # (their first touch made this 3x slower, ~0.2 s at M = 4000)
        for r0, r1, _ in bands:
            diag = gram[r0:r1, r0:r1]
            diag[...] = np.triu(diag) + np.triu(diag, 1).T
            gram[r1:, r0:r1] = gram[r0:r1, r1:].T
        n = float(total["wsum"][0]) if "wsum" in total else self.n  # the total weight W of weighted rows
        targets = () if self.k is None else (total["cross"], total["ysum"], total["yy"])
        if transform is not None:
            return FeatureStats(gram, total["sum"], n, *targets).transformed(transform, overwrite=True)
        for r0, r1, _ in bands:
            gram[r0:r1] *= np.multiply.outer(scale[r0:r1], scale)
        stats = FeatureStats(gram, total["sum"] * scale, n)
        if self.k is not None:
            stats.cross = total["cross"] * scale[:, None]
            stats.ysum = total["ysum"]
            stats.yy = total["yy"]
        return stats


def compensated_add(hi: np.ndarray, lo: np.ndarray, x: np.ndarray, scratch: np.ndarray | None = None) -> None:
    """``(hi, lo) += x`` by Knuth's TwoSum: ``hi`` gets the rounded sum, ``lo`` its exact error.

    ``scratch`` (optional, shape ``(4,) + hi.shape``, float64) avoids
    allocating temporaries, whose first touch is slow on this class of machine.
    """
    xp = array_module(hi)
    if xp is not np:
        # a device: one fused kernel instead of eight launches and four temporaries
        # (measured on an H200 at M = 2000: 5.8 ms of a 7.1 ms tile went to this add)
        _device_two_sum(xp)(x, hi, lo)
        return
    if scratch is None:
        scratch = xp.empty((4,) + hi.shape)
    s, bp, err = scratch[0], scratch[1], scratch[2]
    if x.dtype != hi.dtype:
        # widen float32 tiles once: mixed-dtype ufuncs cast through small buffers, twice here
        scratch[3][...] = x
        x = scratch[3]
    np.add(hi, x, out=s)
    np.subtract(s, hi, out=bp)
    np.subtract(s, bp, out=err)
    np.subtract(hi, err, out=err)  # hi - (s - bp), exact
    np.subtract(x, bp, out=bp)  # x - bp, exact
    err += bp
    lo += err
    hi[...] = s




_DEVICE_KERNELS: dict[str, object] = {}


def _device_two_sum(xp: ModuleType):
    """The elementwise kernel of :func:`compensated_add` on a device (CuPy), built once per process.

    The same operations in the same order as the host branch, in float64, so
    host and device sums agree bitwise for the same tiles (additions and
    subtractions only: nothing a compiler may fuse or reassociate).
    """
    kernel = _DEVICE_KERNELS.get(xp.__name__)
    if kernel is None:
        kernel = xp.ElementwiseKernel(
            "T x", "float64 hi, float64 lo",
            """
            double xd = (double)x;
            double s = hi + xd;
            double bp = s - hi;
            double err = hi - (s - bp);
            err += xd - bp;
            lo += err;
            hi = s;
            """,
            "dxrf_two_sum",
        )
        _DEVICE_KERNELS[xp.__name__] = kernel
    return kernel


def _device_packed_two_sum(xp: ModuleType):
    """The compensated add of a whole ``m x m`` Gram into the packed bands, as one device kernel.

    Element ``(r, c)`` of the Gram (flat index ``i``) belongs to band
    ``b = r // band`` when ``c >= r0 = b * band``; the bands before it are
    full, so its offset in the packed sums has a closed form
    (:func:`_gram_bands`). The arithmetic is :func:`_device_two_sum`'s, so
    the sums equal the host's bitwise.
    """
    name = f"{xp.__name__}-packed"
    kernel = _DEVICE_KERNELS.get(name)
    if kernel is None:
        kernel = xp.ElementwiseKernel(
            "raw T x, int64 m, int64 band", "raw float64 hi, raw float64 lo",
            """
            const long long r = i / m, c = i - r * m;
            const long long b = r / band, r0 = b * band;
            if (c >= r0) {
                const long long p = b * band * m - band * band * (b * (b - 1) / 2) + (r - r0) * (m - r0) + (c - r0);
                double xd = (double)x[i];
                double h = hi[p];
                double s = h + xd;
                double bp = s - h;
                double err = h - (s - bp);
                err += xd - bp;
                lo[p] += err;
                hi[p] = s;
            }
            """,
            "dxrf_packed_two_sum",
        )
        _DEVICE_KERNELS[name] = kernel
    return kernel
