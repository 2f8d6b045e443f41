# usage: python3 kin20k_cg_f32.py TOL (from the repository root; 1e-6 and 1e-4 were run)
import json, sys
sys.path.insert(0, ".")
from workflows import bench_pcg as b
code = b._FIT.format(data="kin40k", load_kw=repr({"split": 0}), cache_fraction=None, m=20000, sigma=1.5, dtype="float32",
                     alpha=1e-6, solver="pcg", tol=float(sys.argv[1]), max_iter=200)
out = b._run(code)
print(json.dumps(out))
print("peak above base MiB", (out["peak"] - out["base"]) / 2**20)
