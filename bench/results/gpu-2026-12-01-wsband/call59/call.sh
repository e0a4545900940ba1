#!/bin/sh
# call 59 (x1): gpu_proto.sh with the band atomics in 32 copies, then the no-atomics build
# (PROTO_BAND_COPIES 0) benched and measured by ncu at R 512
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python DATTN_GIT_COMMIT=fb942c43e3765c68d42d9c5792a267a3fdd2e13f
OUT=$OUT/res sh scripts/gpu_proto.sh
O=$OUT/res/proto
nvcc -std=c++17 -O3 -g -lineinfo -Iinclude --expt-relaxed-constexpr -DDATTN_WITH_CUDA -gencode=arch=compute_90a,code=sm_90a \
  -Isrc/cuda -Itests -DPROTO_BAND_COPIES=0 -o build/bench/proto_c0 bench/proto_ws_bwd.cu > $O/build_c0.log 2>&1
P=build/bench/proto_c0
for sh in "32 512" "8 2048" "2 8192"; do timeout 60 $P --bench $sh 20 512 >> $O/bench_c0.log 2>&1; done
timeout 120 ncu -k regex:dattn_proto_ws --section SpeedOfLight -f -o $O/c0 sh -c "$P --bench 32 512 1 512; $P --bench 8 2048 1 512; $P --bench 2 8192 1 512" > $O/ncu_c0.log 2>&1
ncu --import $O/c0.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_c0_R512.csv 2>&1
rm -f $O/*.ncu-rep
cat $O/summary.txt; grep "ms per call" $O/bench.log $O/bench_c0.log
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
rows = list(csv.reader(open(os.path.join(o, "dur_c0_R512.csv"))))
h = rows[0]; d = h.index("gpu__time_duration.sum")
v = [round(float(x[d]), 3) for x in rows[2:]]
print("no-atomics R512 timed dq/dkdv per shape:", [(v[4 * i + 2], v[4 * i + 3]) for i in range(len(v) // 4)])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
