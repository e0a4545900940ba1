#!/bin/sh
# call 20 (x1) on s3 = main + bwd8 (tc3f opt-in): build, tc3f's full backward sweep bitwise
# against tc3e, sanitizers on tc3f, the bwd bench, the encoder cells x3 alone, and the train
# step's full kernel list at B8 L512 (where its extra launches come from).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 240 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_cuda_bwd --path tc3f --same-as tc3e" 200 build/tests/test_cuda_bwd --path tc3f --same-as tc3e
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(bwd --path tc3f --quick)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --path tc3f --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
b bwd_bench 120 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
b encoder3 200 python3 bench/gpu_bench.py --encoder-only --repeat 3 --json $O/bench/encoder3.json
b train_top 90 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --top 400 --json $O/bench/train_top.json
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
grep -E "B=|tc3f" $O/bench/bwd_bench.log | head -12
tail -15 $O/bench/encoder3.log
grep -E "ratio" $O/bench/train_top.log | head -4
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
