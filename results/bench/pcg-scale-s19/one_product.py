import time, numpy as np
from dxrf.kernels import landmarks as lm
rng=np.random.default_rng(0)
X=rng.normal(size=(2048,3)).astype(np.float32); W=np.ascontiguousarray(rng.normal(size=(3,10000)).astype(np.float32))
out=np.empty((2048,10000),np.float32)
aug=lm.gaussian_landmarks(W)
def t(fn,r=9):
    ts=[]
    for _ in range(r):
        t0=time.perf_counter(); fn(); ts.append(time.perf_counter()-t0)
    return round(np.median(ts)*1e3,1)
print("new given aug", t(lambda: lm.landmark_block(X, W, "gaussian", 0.5, out, aug)))
lm.AUGMENT_MAX_FEATURES=0
print("old sweeps", t(lambda: lm.landmark_block(X, W, "gaussian", 0.5, out, None)))
Xa=np.empty((2048,5),np.float32)
print("matmul aug", t(lambda: np.matmul(Xa, aug, out=out)))
print("min", t(lambda: np.minimum(out, 0, out=out)))
print("exp", t(lambda: np.exp(out, out=out)))
print(aug.flags['C_CONTIGUOUS'], aug.dtype)
