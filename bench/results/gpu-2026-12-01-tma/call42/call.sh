#!/bin/sh
# call 42 (x1): tc3t (tc3g with TMA loads of the backward's column tiles) on the working tree:
# build (sm_90a), test_tma, the full backward sweep on tc3t bitwise against tc3g, sanitizers on
# tc3t (quick), ncu kernel durations tc3g vs tc3t (same build, DATTN_CUDA_BWD), gradients bit
# for bit (bench/gpu_lib_ab.py, both paths).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O/ab
t0=$(date +%s)
S=$O/summary.txt; L=$O/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-40s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
A="-gencode=arch=compute_90a,code=sm_90a"
st build 150 make -j16 CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "Compiling entry|registers|spill" $L | grep -A1 "dattn_bwd_tc3[gft]" > $O/resources_bwd.txt
/usr/local/cuda/bin/cuobjdump -sass build/src/cuda/bwd_tc3t_d64.o > /tmp/t.sass 2>/dev/null
echo "sass tc3t: UTMALDG $(grep -c UTMALDG /tmp/t.sass) SYNCS $(grep -c SYNCS /tmp/t.sass) LDL $(grep -c 'LDL' /tmp/t.sass) STL $(grep -c 'STL' /tmp/t.sass)" >> $S
st test_tma 60 build/tests/test_tma
if grep -q "^test_tma .*rc=0" $S; then
  st "test_cuda_bwd --path tc3t --same-as tc3g --quick" 60 build/tests/test_cuda_bwd --path tc3t --same-as tc3g --quick --seed 61
  st "test_cuda_bwd --path tc3t --same-as tc3g" 240 build/tests/test_cuda_bwd --path tc3t --same-as tc3g --seed 62
  for tool in memcheck racecheck synccheck; do
    st "san-$tool(bwd tc3t --quick)" 150 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --path tc3t --quick --seed 63
  done
  for tag in tc3g tc3t; do
    DATTN_CUDA_BWD=$tag timeout 90 ncu --profile-from-start off -k "regex:dattn_bwd" --section SpeedOfLight -f -o $O/dur_$tag \
      python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --no-flash > $O/ncu_dur_$tag.log 2>&1
    echo "ncu dur $tag rc=$? $(( $(date +%s) - t0 ))s" >> $S
    ncu --import $O/dur_$tag.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_$tag.csv 2>&1
    st "ab $tag" 60 env DATTN_CUDA_BWD=$tag python3 bench/gpu_lib_ab.py run --tag $tag --dir $O/ab
  done
  rm -f $O/*.ncu-rep
  python3 bench/gpu_lib_ab.py compare --dir $O/ab --base tc3g --new tc3t --json $O/ab.json > $O/ab.txt 2>&1
  rm -f $O/ab/*_grads.pt
fi
echo "done at $(( $(date +%s) - t0 ))s" >> $S
cat $S; tail -12 $O/ab.txt 2>/dev/null
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for tag in ("tc3g", "tc3t"):
    try:
        rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
        hdr = rows[0]; ki = hdr.index("Kernel Name"); di = hdr.index("gpu__time_duration.sum")
        print(tag, [(r[ki][-8:], r[di]) for r in rows[2:]])
    except Exception as e:
        print(tag, "no durations", e)
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
