#!/bin/sh
# call 38 (x1): the staged flush values (working tree) against main 84be634 (.gpu/base): builds,
# quick backward test, ncu kernel durations (B32 L512, B8 L2048, B2 L8192), gradients bit for bit
# (bench/gpu_lib_ab.py), the full backward sweep, racecheck / memcheck on the backward (quick).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O/ab
t0=$(date +%s)
S=$O/summary.txt; L=$O/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-40s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
A="-gencode=arch=compute_90a,code=sm_90a"
( cd .gpu/base && make -j3 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_base.log 2>&1; echo "build base rc=$?" >> $S ) &
st build 120 make -j13 CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build
wait
grep -E "Compiling entry|registers|spill" $L | grep -A1 "dattn_bwd_tc3[fg]" > $O/resources_bwd.txt
st "test_cuda_bwd --quick" 30 build/tests/test_cuda_bwd --quick --seed 51
for tag in base new; do
  lib=build/libdattn.so; [ $tag = base ] && lib=.gpu/base/build/libdattn.so
  DATTN_LIBRARY=$lib timeout 60 ncu --profile-from-start off -k "regex:dattn_bwd" --section SpeedOfLight -f -o $O/dur_$tag \
    python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --no-flash > $O/ncu_dur_$tag.log 2>&1
  echo "ncu dur $tag rc=$? $(( $(date +%s) - t0 ))s" >> $S
  ncu --import $O/dur_$tag.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_$tag.csv 2>&1
  st "ab $tag" 40 env DATTN_LIBRARY=$lib python3 bench/gpu_lib_ab.py run --tag $tag --dir $O/ab
done
rm -f $O/*.ncu-rep
python3 bench/gpu_lib_ab.py compare --dir $O/ab --base base --new new --json $O/ab.json > $O/ab.txt 2>&1
rm -f $O/ab/*_grads.pt
st "test_cuda_bwd (default)" 60 build/tests/test_cuda_bwd --seed 52
st "san-racecheck(bwd --quick)" 30 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 53
st "san-memcheck(bwd --quick)" 15 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 54
echo "done at $(( $(date +%s) - t0 ))s" >> $S
cat $S; tail -8 $O/ab.txt
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for tag in ("base", "new"):
    try:
        rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
        hdr = rows[0]; ki = hdr.index("Kernel Name"); di = hdr.index("gpu__time_duration.sum")
        print(tag, [(r[ki][-3:], r[di]) for r in rows[2:]])
    except Exception as e:
        print(tag, "no durations", e)
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
