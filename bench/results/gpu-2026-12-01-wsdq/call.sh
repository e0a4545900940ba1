#!/bin/sh
# call 50 (x1): the warp-specialized nopos dq prototype (bench/proto_ws_dq.cu): build, its
# float64 check, ncu durations at the op-level shapes (H 12), and in the same call the ncu
# durations of the library's dq kernel without position terms (tc3g kv0, gpu_prof_target
# --nopos) and of SDPA flash's backward kernel.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O
S=$O/summary.txt; : > $S
t0=$(date +%s)
A="-gencode=arch=compute_90a,code=sm_90a"
( make -j12 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_lib.log 2>&1; echo "build lib rc=$?" >> $S ) &
nvcc -std=c++17 -O3 -lineinfo -Werror all-warnings -Xptxas -v $A -Isrc/cuda -o /tmp/proto_ws_dq bench/proto_ws_dq.cu > $O/build_proto.log 2>&1
echo "build proto rc=$?" >> $S
timeout 60 /tmp/proto_ws_dq --check > $O/check.log 2>&1; echo "check rc=$?" >> $S
for sh in "32 512" "8 2048" "2 8192"; do timeout 60 /tmp/proto_ws_dq --bench $sh 20 >> $O/bench.log 2>&1; done
echo "bench rc=$? $(( $(date +%s) - t0 ))s" >> $S
timeout 120 ncu -k regex:dattn_proto_ws_dq --launch-count 6 --section SpeedOfLight --section Occupancy -f -o $O/proto sh -c \
  '/tmp/proto_ws_dq --bench 32 512 1; /tmp/proto_ws_dq --bench 8 2048 1; /tmp/proto_ws_dq --bench 2 8192 1' > $O/ncu_proto.log 2>&1
echo "ncu proto rc=$? $(( $(date +%s) - t0 ))s" >> $S
ncu --import $O/proto.ncu-rep --page raw --csv --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread > $O/dur_proto.csv 2>&1
wait
timeout 150 ncu --profile-from-start off -k "regex:dattn_bwd_tc3g|flash_bwd" --section SpeedOfLight -f -o $O/lib \
  python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --nopos > $O/ncu_lib.log 2>&1
echo "ncu lib rc=$? $(( $(date +%s) - t0 ))s" >> $S
ncu --import $O/lib.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_lib.csv 2>&1
rm -f $O/*.ncu-rep
cat $S $O/check.log $O/bench.log; grep -E "Used|spill" $O/build_proto.log
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for f in ("dur_proto.csv", "dur_lib.csv"):
    try:
        rows = list(csv.reader(open(os.path.join(o, f))))
        h = rows[0]; k = h.index("Kernel Name"); d = h.index("gpu__time_duration.sum")
        print(f, [(r[k][:28], r[d]) for r in rows[2:]])
    except Exception as e:
        print(f, "?", e)
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
