# "old" imports pcg_old: dxrf/solvers/pcg.py of commit b4834c7 (git show b4834c7:dxrf/solvers/pcg.py > pcg_old.py)
"""Falkon factors at large M: before (two arrays, LAPACK lauum on one thread) against after (one array, blocked lauum)."""
import sys, time, resource, numpy as np, scipy.linalg.lapack as lp
sys.path.insert(0, ".")  # where pcg_old.py is
from dxrf.features.nystroem import landmark_gram
from dxrf.core.cholesky import lauum_lower
from dxrf.core.blas import blas_limit
which, m = sys.argv[1], int(sys.argv[2])
L = np.random.default_rng(0).normal(size=(m, 10))
K = landmark_gram(np.ascontiguousarray(L.T), "gaussian", 3.0)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
t = time.perf_counter()
if which == "old":
    import pcg_old
    T, f, d = pcg_old.falkon_factors(K, [1e-6], overwrite_k=True)
elif which == "new":
    from dxrf.solvers.falkon import falkon_factors
    f = falkon_factors(K, [1e-6], overwrite_k=True)
elif which == "lauum-lapack":
    A = np.asfortranarray(np.tril(K)); t = time.perf_counter()
    with blas_limit(1): lp.dlauum(A, lower=1, overwrite_c=1)
elif which == "lauum-blocked":
    A = np.asfortranarray(np.tril(K)); t = time.perf_counter()
    lauum_lower(A)
sec = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"{which} M={m}: {sec:.1f} s, peak {peak:.2f} GiB (K alone {K.nbytes/2**30:.2f} GiB, before the factors {base:.2f} GiB)", flush=True)
