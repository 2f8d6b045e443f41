import time, sys, warnings, numpy as np, resource
sys.path.insert(0, "workflows")
import dxrf
from bench_logistic import make_data, _fit_dxrf, _fit_sklearn, explicit_features
hp = sys.argv[1] == "hp"
np._core.multiarray._set_madvise_hugepage(hp)
X, y = make_data(200000, 90, 0)
fm = dict(n_components=500, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0)
kernel = dxrf.RandomFourierFeatures(**fm).fit(X[:1]).kernel_
Z = explicit_features(X, kernel)
alpha = 1e-4
warnings.simplefilter("ignore")
def t(name, f):
    r0=resource.getrusage(resource.RUSAGE_SELF); t0=time.perf_counter(); f(); r1=resource.getrusage(resource.RUSAGE_SELF)
    print(f"hp={hp} {name:28s} {time.perf_counter()-t0:.3f} minflt {r1.ru_minflt-r0.ru_minflt} sys {r1.ru_stime-r0.ru_stime:.2f}", flush=True)
for r in range(3):
    t("dxrf numpy", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
    t("sklearn", lambda: _fit_sklearn(Z, y, alpha, 1e-5, 1000))
    t("dxrf numpy (after sklearn)", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
