#!/bin/sh
# call 34 (x1): ncu kernel durations (locked clocks) of the backward, base (main 43c1030, .gpu/base)
# against the working tree (balanced flush + single-write linear scatter), B32 L512 / B8 L2048 /
# B2 L8192, plus SourceCounters of the new build at the first two shapes.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
A="-gencode=arch=compute_90a,code=sm_90a"
( make -j12 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_new.log 2>&1; echo "build new rc=$?" ) &
( cd .gpu/base && make -j4 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_base.log 2>&1; echo "build base rc=$?" ) &
wait
echo "builds $(( $(date +%s) - t0 ))s"
for tag in base new; do
  lib=build/libdattn.so; [ $tag = base ] && lib=.gpu/base/build/libdattn.so
  DATTN_LIBRARY=$lib timeout 150 ncu --profile-from-start off -k "regex:dattn_bwd" --section SpeedOfLight -f -o $O/dur_$tag \
    python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --no-flash > $O/ncu_dur_$tag.log 2>&1
  echo "dur $tag rc=$? $(( $(date +%s) - t0 ))s"
  ncu --import $O/dur_$tag.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_$tag.csv 2>&1
done
DATTN_LIBRARY=build/libdattn.so timeout 200 ncu --profile-from-start off -k "regex:dattn_bwd_tc3" --section SpeedOfLight --section WarpStateStats \
  --section SourceCounters --import-source yes -f -o $O/src_new python3 bench/gpu_prof_target.py --shapes 32x512,8x2048 --no-flash > $O/ncu_src.log 2>&1
echo "src rc=$? $(( $(date +%s) - t0 ))s"
ncu --import $O/src_new.ncu-rep --page source --csv --print-source sass -k "regex:dattn_" > $O/source.csv 2>&1; gzip -f $O/source.csv
rm -f $O/*.ncu-rep
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for tag in ("base", "new"):
    rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
    hdr = rows[0]; ki = hdr.index("Kernel Name"); di = hdr.index("gpu__time_duration.sum")
    print(tag, [(r[ki][:28], r[di]) for r in rows[2:]])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
