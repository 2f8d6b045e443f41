set -x
cd /work/main
run() { /usr/bin/time -v dxrf reproduce mnist-nystroem -q --m 8000 --bandwidths 6 --alphas 1e-8 --solver pcg --tol 1e-4 --out /work/scratch/s18/mnist8k-$1 2>&1 | grep -v "^\s*$" | grep -i "model\|tuning\|total\|Elapsed\|Maximum res\|error"; }
run after1
git stash -q; run before1; git stash pop -q
run after2
git stash -q; run before2; git stash pop -q
git diff --stat
