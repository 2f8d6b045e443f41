"""Default dxrf fit on flights-3m zarr groups of two sizes: seconds, peak memory of the command's processes, test MSE."""
import json, resource, subprocess, sys, time
import numpy as np, zarr
train, test, out = sys.argv[1], sys.argv[2], sys.argv[3]
cmd = [sys.executable, "-m", "dxrf.cli"]
t0 = time.perf_counter()
fit = subprocess.run([*cmd, "fit", train, "--out", out + "/model.zarr", "--overwrite", "-q"], capture_output=True, text=True)
sec = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(fit.stdout[-2500:], fit.stderr[-1500:])
pred = subprocess.run([*cmd, "predict", out + "/model.zarr", test, "--out", out + "/pred.zarr", "--overwrite", "-q"], capture_output=True, text=True)
print(pred.stderr[-800:])
g = zarr.open_group(test, mode="r"); y = g["y"][:].reshape(-1); p = zarr.open_group(out + "/pred.zarr", mode="r")["y_pred"][:].reshape(-1)
ytr = zarr.open_group(train, mode="r")["y"][:].reshape(-1)
res = {"train": train, "rows": int(ytr.size), "seconds": sec, "peak_mib": peak, "test_mse_scaled": float(np.mean((y - p) ** 2) / np.var(ytr))}
print(json.dumps(res))
