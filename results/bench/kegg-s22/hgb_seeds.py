import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from dxrf.datasets.uci import _load_uci
for split in (0, 1, 2):
    ds = _load_uci("keggdirected", split=split)
    v = ds.y_train.var()
    s = []
    for seed in range(10):
        m = HistGradientBoostingRegressor(random_state=seed).fit(ds.X_train, ds.y_train)
        s.append(np.mean((m.predict(ds.X_test) - ds.y_test) ** 2) / v)
    print(split, np.round(s, 6), "median", np.median(s))
