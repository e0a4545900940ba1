#!/bin/sh
# call 21 (x1) on main with tc3f the default and the merged table reduce: build, the full
# backward sweep on the default, sanitizers, parity, pytest -k cuda, the bwd bench, the
# encoder level with kernel profiles, the train bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 240 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_cuda_bwd (default tc3f)" 150 build/tests/test_cuda_bwd
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(bwd --quick)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
st "parity" 120 python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 150 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
b bwd_bench 100 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
b encoder_prof 150 python3 bench/gpu_bench.py --encoder-only --profile --json $O/bench/encoder_prof.json
b train_bench 150 python3 bench/gpu_train_bench.py --top 40 --json $O/bench/train_bench.json
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
grep -E "B=|tc3e \(previous" $O/bench/bwd_bench.log | head -12
grep -vE "^ +[0-9]+ +[0-9.]+ ms" $O/bench/encoder_prof.log | tail -12
grep -E "ratio" $O/bench/train_bench.log | head -4
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
