import time, numpy as np, dxrf
if __name__ == "__main__":
    X = np.random.default_rng(0).standard_normal((1_000_000, 90)).astype(np.float32)
    fmap = dxrf.RandomFourierFeatures(2000, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0).fit(np.zeros((1, 90)))
    dxrf.accumulate(X[:100_000], features=fmap)
    for _ in range(2):
        t0 = time.time(); dxrf.accumulate(X, features=fmap); print(f"in process: {time.time()-t0:.2f} s", flush=True)
