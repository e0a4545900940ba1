#!/bin/sh
# call 17 (x2) on s2 (main + bwd7 + fwd7): GPU 0: build, the new opt-in kernels pinned and
# bitwise against their bases (sm90w1e / sm90w1f vs sm90w1c, tc3e vs tc3d), sanitizers on
# them, pytest -k cuda (the encoder's no-mask path). GPU 1 after the build: op bench (w1e /
# w1f columns, encoder level), bwd bench (tc3e), train bench (no mask on full rows).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-52s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 240 make -j32 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "registers|spill" $L | sort | uniq -c | head -80 > $O/check/resources.txt
echo "build done at $(( $(date +%s) - t0 ))s"
(
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bench 150 python3 bench/gpu_bench.py --json $O/bench/bench.json
  b bwd_bench 100 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  b train_bench 150 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
) &
pb=$!
export CUDA_VISIBLE_DEVICES=0
for p in sm90w1e sm90w1f; do
  st "test_cuda_fwd --path $p --same-as sm90w1c" 150 build/tests/test_cuda_fwd --path $p --same-as sm90w1c
  for tool in racecheck synccheck; do
    st "san-$tool(fwd --path $p)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --path $p --quick --seed 7
  done
done
st "test_cuda_bwd --path tc3e --same-as tc3d" 150 build/tests/test_cuda_bwd --path tc3e --same-as tc3d
for tool in memcheck racecheck synccheck; do
  st "san-$tool(bwd --path tc3e)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --path tc3e --quick --seed 7
done
st "parity" 120 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $S $O/bench/summary.txt
grep -E "passed, " $L | tail -6
grep -E "B=|tc3e" $O/bench/bwd_bench.log | grep -v "tile kind" | head -20
grep -E "ratio|top dattn" $O/bench/train_bench.log | head -8
python3 -c "
import json;d=json.load(open('$O/bench/bench.json'))
for r in d['op']: print(r['B'], r['L'], *(k+'='+str(round(r.get(k) or 0, 3)) for k in ('dattn_ms','dattn_w1e_ms','dattn_w1f_ms','flash_ms','dattn_nopos_ms','dattn_nopos_w1e_ms','dattn_satmost_ms','dattn_satmost_w1e_ms')))
for r in d.get('encoder', []): print('enc', r.get('B'), r.get('L'), r.get('lens') is not None, round(r.get('ratio_vs_floor') or 0, 3), r.get('dattn_ms'), r.get('sdpa_floor_ms'))
" 2>&1 | head -20
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
