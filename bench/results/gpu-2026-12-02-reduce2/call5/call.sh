#!/bin/sh
# call 5 (2026-12-02 session): the table reduce in two passes (rows in place, then slots) on the
# GPU: build both trees (this one, and main 2fdd080), the ws sweep (packed cases included),
# --quick, packed == padded, the dropout sweep, the four sanitizers on --quick, the reduce kernels'
# durations under ncu (both libraries, B8 L512 and B2 L8192), then a same-run A/B of the two
# libraries (bench/gpu_lib_ab.py, 2-3 rounds alternated)
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
( $T --sweep ws --seed 301 > $O/t_ws.log 2>&1; echo "rc $?" >> $O/t_ws.log ) &
( $T --quick --seed 302 > $O/t_quick.log 2>&1; echo "rc $?" >> $O/t_quick.log ) &
( $T --sweep pvp --seed 304 > $O/t_pvp.log 2>&1; echo "rc $?" >> $O/t_pvp.log ) &
( $T --sweep dropout --seed 305 > $O/t_dropout.log 2>&1; echo "rc $?" >> $O/t_dropout.log ) &
for tool in memcheck racecheck initcheck synccheck; do
  ( timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --quick --seed 7 > $O/san_$tool.log 2>&1; echo "rc $?" >> $O/san_$tool.log ) &
done
wait
for f in $O/t_*.log $O/san_*.log; do echo "$f: $(grep -E '^[0-9]+ passed' $f | tail -1) $(grep -E 'ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done
for lib in main new; do
  so=build/libdattn.so; [ $lib = main ] && so=/tmp/oldb/libdattn.so
  for shp in "8 512" "2 8192"; do
    f=$O/ncu_reduce_${lib}_$(echo $shp | tr ' ' x).csv
    DATTN_LIBRARY=$so timeout 100 ncu --clock-control none -k 'regex:ws_reduce|ws_rowsum|ws_slotsum' --metrics gpu__time_duration.sum --csv \
      python3 .gpu/red_probe.py $shp > $f 2>&1
    echo "$lib B,L=$shp: $(grep gpu__time_duration $f | awk -F'","' '{print $5 "=" $NF}' | tr -d '"' | tr '\n' ' ')"
  done
done | tee $O/ncu_reduce.txt
echo "seconds so far: $(( $(date +%s) - TSTART ))"
D=$O/ab; mkdir -p $D
t0=$(date +%s)
for i in 1 2 3; do
  [ $i -gt 1 ] && [ $(( $(date +%s) - TSTART )) -gt 420 ] && break
  DATTN_LIBRARY=/tmp/oldb/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag main --dir $D > $D/run_main_$i.log 2>&1
  DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag new --dir $D > $D/run_new_$i.log 2>&1
done
python3 bench/gpu_lib_ab.py compare --dir $D --base main --new new --json $O/ab.json 2>&1 | tee $O/ab.txt
rm -f $D/*.pt
echo "call seconds: $(( $(date +%s) - TSTART ))"
cd $O && tar czf /tmp/logs.tgz *.log ab && rm -rf ab *.log && mv /tmp/logs.tgz $O/
