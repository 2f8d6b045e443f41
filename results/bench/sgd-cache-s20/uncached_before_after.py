import sys, time, numpy as np, dxrf
from dxrf.datasets import load
from dxrf.learners.sgd import RandomFeatureSGDClassifier
print(dxrf.__file__)
ds = load("mnist"); X = np.ascontiguousarray(ds.X_train, dtype=np.float64); y = ds.y_train
fmap = dxrf.RandomFourierFeatures(2000, bandwidth="median", dtype="float32", random_state=0).fit(X)
kw = dict(batch_size=256, max_passes=5, validation=0.2, early_stopping=False, random_state=0)
if "cache" in sys.argv: kw["cache_features"] = False
ts = []
for r in range(3):
    t = time.perf_counter(); est = RandomFeatureSGDClassifier(fmap, loss="logistic", **kw).fit(X, y); ts.append(time.perf_counter() - t)
print("median", np.median(ts), ts, est.validation_errors_[-1])
