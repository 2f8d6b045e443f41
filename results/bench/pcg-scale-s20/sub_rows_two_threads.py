import time, numpy as np, dxrf
from concurrent.futures import ThreadPoolExecutor
from dxrf.core.blas import blas_limit
from dxrf.kernels.landmark_products import landmark_products, sub_rows_for
from dxrf.solvers.landmark_solve import landmark_values
rng=np.random.default_rng(0)
for d,m in [(3,10000),(3,20000),(8,4000)]:
    n=16384
    Xs=[rng.normal(size=(n,d)).astype(np.float32) for _ in range(2)]
    f=dxrf.NystroemFeatures(m,bandwidth=1.0,dtype="float32",random_state=0).fit(rng.normal(size=(m*2,d)))
    k=landmark_values(f.kernel_)
    V=rng.normal(size=(m,4))
    def job(X, sr):
        with blas_limit(1):
            return landmark_products(X,k,V,sub_rows=sr)
    res={}
    with ThreadPoolExecutor(2) as ex:
        for sr in (2048, sub_rows_for(m,4), 512, 256):
            ts=[]
            for r in range(5):
                t=time.perf_counter(); list(ex.map(job, Xs, [sr,sr])); ts.append(time.perf_counter()-t)
            res[sr]=round(np.median(ts)*1e9/(2*n*m),3)
    print(d,m,"ns/entry (2 threads)",res,flush=True)
