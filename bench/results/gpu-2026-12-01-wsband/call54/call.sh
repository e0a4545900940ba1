#!/bin/sh
# call 54 (x1): band tiles in the ws prototype, two orders: lean (default build, G, H, then S/dP)
# and fused (-DPROTO_BAND_FUSED=1, spills allowed): checks, cudaEvent benches at R 0 / 512 and
# all-band (R = L), ncu durations, and a SourceCounters profile of the lean pair at B2 L2048 R2048.
set -u
O=$OUT/res; mkdir -p $O; S=$O/summary.txt; : > $S
t0=$(date +%s)
make CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" build/bench/proto_ws_bwd > $O/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 ))s" >> $S
nvcc -std=c++17 -O3 -g -lineinfo -Iinclude -Xptxas -warn-spills --expt-relaxed-constexpr -DDATTN_WITH_CUDA -Xptxas -v \
  -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Itests -DPROTO_BAND_FUSED=1 -o build/bench/proto_fused bench/proto_ws_bwd.cu > $O/build_fused.log 2>&1
echo "build fused rc=$? $(( $(date +%s) - t0 ))s" >> $S
for P in build/bench/proto_ws_bwd build/bench/proto_fused; do
  n=$(basename $P)
  timeout 60 $P --check > $O/check_$n.log 2>&1; echo "check $n rc=$? $(tail -1 $O/check_$n.log)" >> $S
  for r in 0 512; do for sh in "32 512" "8 2048" "2 8192"; do timeout 60 $P --bench $sh 20 $r >> $O/bench_$n.log 2>&1; done; done
  timeout 60 $P --bench 2 8192 20 8192 >> $O/bench_$n.log 2>&1
  timeout 60 $P --bench 8 2048 20 2048 >> $O/bench_$n.log 2>&1
done
echo "bench done $(( $(date +%s) - t0 ))s" >> $S
P=build/bench/proto_ws_bwd
for v in "lean 0" "lean 512" "fused 512"; do
  set -- $v
  B=$P; [ $1 = fused ] && B=build/bench/proto_fused
  timeout 120 ncu -k regex:dattn_proto_ws --section SpeedOfLight -f -o $O/p_$1_$2 sh -c "$B --bench 32 512 1 $2; $B --bench 8 2048 1 $2; $B --bench 2 8192 1 $2" > $O/ncu_$1_$2.log 2>&1
  ncu --import $O/p_$1_$2.ncu-rep --page raw --csv --metrics gpu__time_duration.sum,launch__registers_per_thread > $O/dur_$1_$2.csv 2>&1
done
echo "ncu durations $(( $(date +%s) - t0 ))s" >> $S
timeout 200 ncu -k regex:dattn_proto_ws --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  --section SourceCounters --import-source yes -f -o $O/prof $P --bench 2 2048 1 2048 > $O/ncu_prof.log 2>&1
echo "prof rc=$? $(( $(date +%s) - t0 ))s" >> $S
ncu --import $O/prof.ncu-rep --print-details all > $O/details.txt 2>&1
ncu --import $O/prof.ncu-rep --page source --csv --print-source sass > $O/source.csv 2>&1
gzip -f $O/source.csv
rm -f $O/*.ncu-rep
cat $S; grep -h "ms per call" $O/bench_*.log
python3 - $O <<'PY'
import csv, sys, os, glob
o = sys.argv[1]
for f in sorted(glob.glob(os.path.join(o, "dur_*.csv"))):
    rows = list(csv.reader(open(f)))
    try:
        h = rows[0]; k = h.index("Kernel Name"); d = h.index("gpu__time_duration.sum")
        print(os.path.basename(f), [(x[k][-4:], round(float(x[d]), 3)) for x in rows[2:]])
    except Exception as e:
        print(f, "?", e)
PY
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|Registers Per" $O/details.txt | head -12
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
