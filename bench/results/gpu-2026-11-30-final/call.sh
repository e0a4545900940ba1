#!/bin/sh
# call 24 (x1) on main with sm90w1g the forward default: build, the full forward and backward
# sweeps on the defaults, sanitizers on the forward, parity, pytest -k cuda, the full op /
# memory / encoder bench, the train bench without compile sides.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 240 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_cuda_fwd (default sm90w1g)" 150 build/tests/test_cuda_fwd
st "test_cuda_bwd (default tc3f, fwd sm90w1g)" 120 build/tests/test_cuda_bwd
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(fwd --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
st "parity" 120 python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 100 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
b bench 150 python3 bench/gpu_bench.py --json $O/bench/bench.json
b train_bench 100 python3 bench/gpu_train_bench.py --no-compile --json $O/bench/train_bench.json
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
python3 -c "
import json;d=json.load(open('$O/bench/bench.json'))
for r in d['op']: print(r['B'], r['L'], round(r['dattn_ms'],3), round(r['dattn_w1c_ms'],3), round(r['sdpa_flash_ms'],3), round(r['ratio_vs_flash'],3))
print('memory', d['memory']['ratio'])
for k,r in d['encoder'].items(): print(k, r.get('dattn_ms'), r.get('sdpa_floor_ms'), r.get('ratio_vs_floor'), r.get('dattn_graphs_ms'))
" 2>&1 | head -12
grep -E "ratio" $O/bench/train_bench.log | head -4
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
