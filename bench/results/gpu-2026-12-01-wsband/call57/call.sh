#!/bin/sh
# call 57 (x1): PROTO_DEFER 1 (default build) against 0: checks, sanitizers on the default, cudaEvent
# benches (R 0 / 512 / all-band), ncu durations at R 0 / 512
set -u
O=$OUT/res; mkdir -p $O; S=$O/summary.txt; : > $S
t0=$(date +%s)
make CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" build/bench/proto_ws_bwd > $O/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 ))s" >> $S
nvcc -std=c++17 -O3 -g -lineinfo -Iinclude -Werror all-warnings -Xptxas -warn-spills,-warn-lmem-usage,-Werror --expt-relaxed-constexpr -DDATTN_WITH_CUDA -Xptxas -v \
  -gencode=arch=compute_90a,code=sm_90a -Isrc/cuda -Itests -DPROTO_DEFER=0 -o build/bench/proto_defer0 bench/proto_ws_bwd.cu > $O/build_defer0.log 2>&1
echo "build defer0 rc=$? $(( $(date +%s) - t0 ))s" >> $S
for P in build/bench/proto_ws_bwd build/bench/proto_defer0; do
  n=$(basename $P)
  timeout 60 $P --check > $O/check_$n.log 2>&1; echo "check $n rc=$? $(tail -1 $O/check_$n.log)" >> $S
  for r in 0 512; do for sh in "32 512" "8 2048" "2 8192"; do timeout 60 $P --bench $sh 20 $r >> $O/bench_$n.log 2>&1; done; done
  timeout 60 $P --bench 8 2048 20 2048 >> $O/bench_$n.log 2>&1
  timeout 60 $P --bench 2 8192 20 8192 >> $O/bench_$n.log 2>&1
  for r in 0 512; do
    timeout 120 ncu -k regex:dattn_proto_ws --section SpeedOfLight -f -o $O/p_${n}_$r sh -c "$P --bench 32 512 1 $r; $P --bench 8 2048 1 $r; $P --bench 2 8192 1 $r" > $O/ncu_${n}_$r.log 2>&1
    ncu --import $O/p_${n}_$r.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_${n}_$r.csv 2>&1
  done
done
for tool in racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/bench/proto_ws_bwd --check > $O/san_$tool.log 2>&1
  echo "san $tool rc=$? $(tail -2 $O/san_$tool.log | tr '\n' ' ')" >> $S
done
echo "done $(( $(date +%s) - t0 ))s" >> $S
rm -f $O/*.ncu-rep
cat $S; grep -h "ms per call" $O/bench_*.log
python3 - $O <<'PY'
import csv, sys, os, glob
o = sys.argv[1]
for f in sorted(glob.glob(os.path.join(o, "dur_*.csv"))):
    rows = list(csv.reader(open(f)))
    try:
        h = rows[0]; k = h.index("Kernel Name"); d = h.index("gpu__time_duration.sum")
        v = [round(float(x[d]), 3) for x in rows[2:]]
        print(os.path.basename(f), "timed dq/dkdv per shape:", [(v[4 * i + 2], v[4 * i + 3]) for i in range(len(v) // 4)])
    except Exception as e:
        print(f, "?", e)
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
