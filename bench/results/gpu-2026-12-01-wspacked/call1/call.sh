#!/bin/sh
# call 1 (2026-12-01 evening): the reduce's slot ranges by counting and packed calls on the ws
# backward (bwd_ws_d64_sm90.cu), on the GPU: build both trees (this one, and main 9b2fe5a), the ws
# sweep (packed cases included), the packed sweep, packed == padded and --quick under the
# sanitizers, then a same-run A/B of the two libraries (bench/gpu_lib_ab.py, 3 rounds alternated:
# padded shapes = the reduce change, packed rows = ws against main's tc3g)
set -u
TSTART=$(date +%s)
export PYTHONUNBUFFERED=1
O=$OUT; A="-gencode=arch=compute_90a,code=sm_90a"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${DATTN_GIT_COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; } > $O/env.txt
rm -rf /tmp/old && cp -r .gpu/old /tmp/old
(make -j10 CUDA=1 CUDA_ARCHS="$A" lib tests-build > $O/build.log 2>&1; echo "new rc $?" >> $O/build.log) &
(cd /tmp/old && make -j6 CUDA=1 CUDA_ARCHS="$A" BUILD=/tmp/oldb lib > /tmp/oldbuild.log 2>&1; echo "old rc $?" >> /tmp/oldbuild.log) &
wait; tail -1 $O/build.log; tail -1 /tmp/oldbuild.log
T=build/tests/test_cuda_bwd
( $T --sweep ws --seed 101 > $O/t_ws.log 2>&1; echo "rc $?" >> $O/t_ws.log ) &
( $T --quick --seed 102 > $O/t_quick.log 2>&1; echo "rc $?" >> $O/t_quick.log ) &
( $T --sweep packed --seed 103 > $O/t_packed.log 2>&1; echo "rc $?" >> $O/t_packed.log ) &
( $T --sweep pvp --seed 104 > $O/t_pvp.log 2>&1; echo "rc $?" >> $O/t_pvp.log ) &
( $T --sweep dropout --seed 105 > $O/t_dropout.log 2>&1; echo "rc $?" >> $O/t_dropout.log ) &
for tool in memcheck racecheck initcheck synccheck; do
  ( timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --quick --seed 7 > $O/san_$tool.log 2>&1; echo "rc $?" >> $O/san_$tool.log ) &
done
wait
for f in $O/t_*.log $O/san_*.log; do echo "$f: $(grep -E '^[0-9]+ passed' $f | tail -1) $(grep -E 'ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done
D=$O/ab; mkdir -p $D
t0=$(date +%s)
for i in 1 2 3; do
  [ $i -gt 1 ] && [ $(( $(date +%s) - t0 )) -gt 150 ] && break
  DATTN_LIBRARY=/tmp/oldb/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag main --dir $D > $D/run_main_$i.log 2>&1
  DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag count --dir $D > $D/run_count_$i.log 2>&1
done
python3 bench/gpu_lib_ab.py compare --dir $D --base main --new count --json $O/ab.json 2>&1 | tee $O/ab.txt
rm -f $D/*.pt
echo "call seconds: $(( $(date +%s) - TSTART ))"
cd $O && tar czf /tmp/logs.tgz *.log ab && rm -rf ab *.log && mv /tmp/logs.tgz $O/
