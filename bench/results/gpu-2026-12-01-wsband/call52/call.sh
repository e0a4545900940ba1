#!/bin/sh
# call 52 (x1): the prototype after the per-zone specialization of the tile body: check, bench,
# ncu durations at R0 / R512 (library and flash figures: call 51, same session)
set -u
O=$OUT/res; mkdir -p $O; S=$O/summary.txt; : > $S
t0=$(date +%s)
make CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" build/bench/proto_ws_bwd > $O/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 ))s" >> $S
P=build/bench/proto_ws_bwd
timeout 60 $P --check > $O/check.log 2>&1; echo "check rc=$? $(tail -1 $O/check.log)" >> $S
for r in 0 512; do for sh in "32 512" "8 2048" "2 8192"; do timeout 60 $P --bench $sh 20 $r >> $O/bench.log 2>&1; done; done
for r in 0 512; do
  timeout 120 ncu -k regex:dattn_proto_ws --section SpeedOfLight -f -o $O/p$r sh -c "$P --bench 32 512 1 $r; $P --bench 8 2048 1 $r; $P --bench 2 8192 1 $r" > $O/ncu$r.log 2>&1
  ncu --import $O/p$r.ncu-rep --page raw --csv --metrics gpu__time_duration.sum,launch__registers_per_thread > $O/dur$r.csv 2>&1
done
echo "done $(( $(date +%s) - t0 ))s" >> $S
rm -f $O/*.ncu-rep
cat $S $O/bench.log
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for r in ("0", "512"):
    rows = list(csv.reader(open(os.path.join(o, f"dur{r}.csv"))))
    h = rows[0]; k = h.index("Kernel Name"); d = h.index("gpu__time_duration.sum")
    print("R", r, [(x[k][-4:], round(float(x[d]), 3)) for x in rows[2:]])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
