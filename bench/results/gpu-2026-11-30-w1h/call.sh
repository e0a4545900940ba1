#!/bin/sh
# call 27 (x1) on cand3 = main + trainl (a layer's projections in one autograd node) + w1h
# (sm90w1g with sm90w1e's band-tile overheads, opt-in): build; w1h's forward sweep bitwise
# against sm90w1g; racecheck / synccheck on it; the op bench (w1h columns); pytest -k cuda
# (test_proj's CUDA cases); the train step B8 L512 lean / old (DATTN_HF_LEAN=0) interleaved,
# two readings each, one with the kernel list; B4 L2048 lean.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-48s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $S; }
st build 240 make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build
st "test_cuda_fwd --path sm90w1h --same-as sm90w1g" 150 build/tests/test_cuda_fwd --path sm90w1h --same-as sm90w1g --seed 7
for tool in racecheck synccheck; do
  st "san-$tool(fwd --path sm90w1h --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --path sm90w1h --quick --seed 7
done
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
b bench_op 150 python3 bench/gpu_bench.py --op-only --json $O/bench/bench_op.json
st "pytest(cuda)" 150 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
b train_lean_1 90 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --top 400 --json $O/bench/train_lean_1.json
b train_old_1 90 env DATTN_HF_LEAN=0 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/bench/train_old_1.json
b train_lean_2 90 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/bench/train_lean_2.json
b train_old_2 90 env DATTN_HF_LEAN=0 python3 bench/gpu_train_bench.py --cases 8x512 --no-compile --no-floor --no-profile --json $O/bench/train_old_2.json
b train_b4_lean 90 python3 bench/gpu_train_bench.py --cases 4x2048 --no-compile --no-floor --top 12 --json $O/bench/train_b4_lean.json
echo "done at $(( $(date +%s) - t0 ))s"
cat $S
tail -26 $O/bench/bench_op.log | grep -v Warn | head -30
for f in train_lean_1 train_old_1 train_lean_2 train_old_2 train_b4_lean; do echo "-- $f"; grep -E "(transformers|dattn) *:|ratio|launch" $O/bench/$f.log | head -6; done
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
