#!/bin/sh
# call 6 (2026-12-02): the ws forward (fwd_ws_d64_sm90.cu) on the GPU: build, test_cuda_fwd
# --path ws (its sweep, then every case: eligible ones on ws) and the default sweep side by
# side, compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on --path ws --quick,
# then bench/gpu_bench.py (ws columns: DATTN_CUDA_FWD=ws)
set -u
export PYTHONUNBUFFERED=1
O=$OUT; A="-gencode=arch=compute_90a,code=sm_90a"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${DATTN_GIT_COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; } > $O/env.txt
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build > $O/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 ))s"
grep -A3 "dattn_fwd_ws" $O/build.log | grep -E "entry|Used|spill" > $O/resources.txt
T=build/tests/test_cuda_fwd
( timeout 300 $T --path ws --seed 301 > $O/t_ws.log 2>&1; echo "rc $?" >> $O/t_ws.log ) &
( timeout 300 $T --seed 302 > $O/t_default.log 2>&1; echo "rc $?" >> $O/t_default.log ) &
for tool in memcheck racecheck synccheck; do
  ( timeout 250 compute-sanitizer --tool $tool --error-exitcode 9 $T --path ws --quick --seed 7 > $O/san_$tool.log 2>&1; echo "rc $?" >> $O/san_$tool.log ) &
done
wait
for f in $O/t_*.log $O/san_*.log; do echo "$f: $(grep -E '^[0-9]+ passed' $f | tail -1) $(grep -E 'ERROR SUMMARY' $f | tail -1) $(tail -1 $f) $(grep -c '^FAIL' $f) FAIL lines"; done
echo "tests done $(( $(date +%s) - t0 ))s"
timeout 200 env DATTN_LIBRARY=$(pwd)/build/libdattn.so python3 bench/gpu_bench.py --json $O/bench.json --op-only > $O/bench.log 2>&1; echo "bench rc $?"
sed -n '/^shape              dattn        ws/,/^default path/p' $O/bench.log | head -8; head -5 $O/bench.log >/dev/null
for f in $O/t_*.log $O/san_*.log; do echo "== $f"; grep -E "^FAIL|passed|ERROR SUMMARY|Race reported|^rc" $f | head -12; done > $O/tests.txt
rm -f $O/t_*.log $O/san_*.log
echo "total $(( $(date +%s) - t0 ))s"
