#!/bin/sh
# call 61 (x1): scripts/gpu_proto.sh on the prototype whose band table gradients go by bulk
# reductions (PROTO_BAND_FLUSH 2), a build with the deterministic flush (1) measured by ncu in
# the same call, then racecheck / synccheck / memcheck on its --check
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python DATTN_GIT_COMMIT=bcec551d559f149eef47109ca0232f11712330ac
OUT=$OUT/res sh scripts/gpu_proto.sh --r "512"
O=$OUT/res/proto
nvcc -std=c++17 -O3 -lineinfo -Iinclude --expt-relaxed-constexpr -DDATTN_WITH_CUDA -DPROTO_BAND_FLUSH=1 -Xptxas -v \
  -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Itests -o build/bench/proto_f1 bench/proto_ws_bwd.cu > $O/build_f1.log 2>&1
cmds=""; for s in "32 512" "8 2048" "2 8192"; do cmds="$cmds build/bench/proto_f1 --bench $s 1 512;"; done
timeout 200 ncu -k "regex:dattn_proto_ws" --section SpeedOfLight -f -o $O/f1 sh -c "$cmds" > $O/ncu_f1.log 2>&1
ncu --import $O/f1.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_f1.csv 2>&1
rm -f $O/f1.ncu-rep
for tool in racecheck synccheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/bench/proto_ws_bwd --check > $O/san_$tool.log 2>&1
  echo "san $tool rc=$? $(tail -2 $O/san_$tool.log | tr '\n' ' ')" >> $O/summary.txt
done
cat $O/summary.txt; grep "ms per call" $O/bench.log; cat $O/resources.txt
python3 - $O/dur_f1.csv <<'PY'
import csv,sys
r=list(csv.reader(open(sys.argv[1]))); h=r[0]; k=h.index("Kernel Name"); d=h.index("gpu__time_duration.sum")
v=[float(x[d]) for x in r[2:] if len(x)>d]
print("flush-1 build (ms, timed launches): ", [round(v[i+2]+v[i+3],3) for i in range(0,len(v)-3,4)])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
