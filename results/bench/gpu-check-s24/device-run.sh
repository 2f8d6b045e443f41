#!/usr/bin/env bash
# device run: the accelerator check on this tree, then the same bench at the baseline commit
set -uo pipefail
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
t0=$(date +%s)
python3 -V; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tail -1
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site
fi
python3 -c "import dask, distributed, zarr, numpy, scipy, sklearn; print('deps', dask.__version__, zarr.__version__, numpy.__version__, scipy.__version__, sklearn.__version__)" || exit 4
# nothing is installed there: dxrf.workflows is the top-level workflows/ folder, linked in
[ -e dxrf/workflows ] || ln -s ../workflows dxrf/workflows
[ -e gpu-baseline/dxrf/workflows ] || ln -s ../workflows gpu-baseline/dxrf/workflows
python3 -c "import dxrf.workflows.bench_gpu as b; print('new bench at', b.__file__)" || exit 5
echo "== new ($(git rev-parse --short HEAD 2>/dev/null) + tree) at $(( $(date +%s) - t0 )) s"
timeout ${NEW_TIMEOUT:-300} scripts/gpu-check --no-install --out "$OUT/new" -- ${NEW_ARGS:-} 2>&1 | tee "$OUT/new.log" | grep -v "^ *$" | tail -40
echo "== baseline at $(( $(date +%s) - t0 )) s"
(cd gpu-baseline && python3 -c "import dxrf.workflows.bench_gpu as b; print('baseline bench at', b.__file__)" && \
  timeout ${BASE_TIMEOUT:-200} python3 -m dxrf.cli bench gpu --skip-tests --out "$OUT/base" ${BASE_ARGS:-}) 2>&1 | tee "$OUT/base.log" | tail -25
rm -rf "$OUT"/new/pass "$OUT"/base/pass "$OUT"/new/gpu-tests.xml "$OUT"/base/bench-gpu.md
echo "== done at $(( $(date +%s) - t0 )) s"; ls -R "$OUT"
