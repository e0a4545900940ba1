#!/bin/sh
# call 6 (2026-12-02 session): the two-pass reduce's second form (slot ranges by a warp's
# 32-way search, 8 chains, the saturated partials summed in pass 1): build both trees (this one,
# and main 2fdd080), the ws sweep (packed cases included), --quick, packed == padded, memcheck and
# initcheck on --quick, the reduce kernels' durations under ncu (both libraries), then a same-run
# A/B of the two libraries (bench/gpu_lib_ab.py, 3 rounds, the order of the two builds
# alternated from round to round: call 5 always ran main first)
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
( $T --sweep ws --seed 401 > $O/t_ws.log 2>&1; echo "rc $?" >> $O/t_ws.log ) &
( $T --quick --seed 402 > $O/t_quick.log 2>&1; echo "rc $?" >> $O/t_quick.log ) &
( $T --sweep pvp --seed 404 > $O/t_pvp.log 2>&1; echo "rc $?" >> $O/t_pvp.log ) &
for tool in memcheck initcheck; do
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
  for tag in $( [ $((i % 2)) = 1 ] && echo main new || echo new main ); do
    so=build/libdattn.so; [ $tag = main ] && so=/tmp/oldb/libdattn.so
    DATTN_LIBRARY=$so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag $tag --dir $D > $D/run_${tag}_$i.log 2>&1
  done
done
python3 bench/gpu_lib_ab.py compare --dir $D --base main --new new --json $O/ab.json 2>&1 | tee $O/ab.txt
rm -f $D/*.pt
echo "call seconds: $(( $(date +%s) - TSTART ))"
cd $O && tar czf /tmp/logs.tgz *.log ab && rm -rf ab *.log && mv /tmp/logs.tgz $O/
