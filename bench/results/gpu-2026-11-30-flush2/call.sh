#!/bin/sh
# call 35 (x1): the commit with the flush changes (balanced partial, old partial values loaded
# before the barrier, single-write linear scatter). GPU runner steps on it (SASS check, the
# full forward / backward sweeps on the defaults, tc3 bitwise tc3b (full), tc3e / tc3g bitwise
# tc3f (quick), dropout sweep, sanitizers, parity, pytest -k cuda, finetune-e2e, demo); then
# ncu kernel durations of the backward against main 43c1030 (.gpu/base) and the gradients of
# bench/gpu_lib_ab.py's cases bit for bit against it.
set -u
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/ab
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-48s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
A="-gencode=arch=compute_90a,code=sm_90a"
( cd .gpu/base && make -j3 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_base.log 2>&1; echo "build base rc=$?" >> $O/base.rc ) &
st build 300 make -j13 CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "Compiling entry|registers|spill" $L | grep -A1 "dattn_bwd_tc3" > $O/check/resources_bwd.txt
(
  for o in build/src/cuda/fwd_sm80_d*.o; do
    n=$(cuobjdump -sass "$o" | grep -c HMMA); m=$(cuobjdump -sass "$o" | grep -cE "LDL|STL")
    echo "$o: HMMA $n LDL/STL $m"; [ "$n" -gt 0 ] && [ "$m" -eq 0 ] || exit 1
  done
  for o in build/src/cuda/*_sm90.o build/src/cuda/bwd_tc3f_d64.o build/src/cuda/bwd_tc3g_d64.o; do
    n=$(cuobjdump -sass "$o" | grep -cE "HGMMA|HMMA"); m=$(cuobjdump -sass "$o" | grep -cE "LDL|STL")
    echo "$o: HGMMA/HMMA $n LDL/STL $m"; [ "$n" -gt 0 ] && [ "$m" -eq 0 ] || exit 1
  done
) > $O/check/sass.txt 2>&1; echo "sass check rc=$?" >> $S
st test_wgmma 60 build/tests/test_wgmma
st test_dropout 60 build/tests/test_dropout
st "test_cuda_fwd (default)" 150 build/tests/test_cuda_fwd --seed 41
st "test_cuda_bwd (default tc3g)" 150 build/tests/test_cuda_bwd --seed 42
st "test_cuda_bwd --path tc3 --same-as tc3b" 150 build/tests/test_cuda_bwd --path tc3 --same-as tc3b --seed 43
st "test_cuda_bwd --path tc3e --same-as tc3f --quick" 60 build/tests/test_cuda_bwd --path tc3e --same-as tc3f --quick --seed 44
st "test_cuda_bwd --path tc3g --same-as tc3f --quick" 60 build/tests/test_cuda_bwd --path tc3g --same-as tc3f --quick --seed 45
st "DATTN_CUDA_FWD=sm80 test_cuda_bwd --sweep dropout" 60 env DATTN_CUDA_FWD=sm80 build/tests/test_cuda_bwd --sweep dropout --seed 46
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(fwd --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --quick --seed 7
  st "san-$tool(bwd --quick)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 8
done
st "san-racecheck(bwd --sweep dropout --max-l 140)" 90 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --sweep dropout --max-l 140 --seed 9
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python
st parity 120 python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 150 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
st finetune-e2e 120 python3 scripts/finetune_e2e.py --device cuda --json $O/check/finetune_e2e.json
st "demo(cuda)" 100 python3 -m dattn demo --device cuda --quiet
wait
cat $O/base.rc >> $S
for tag in base new; do
  lib=build/libdattn.so; [ $tag = base ] && lib=.gpu/base/build/libdattn.so
  DATTN_LIBRARY=$lib timeout 100 ncu --profile-from-start off -k "regex:dattn_bwd" --section SpeedOfLight -f -o $O/dur_$tag \
    python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --no-flash > $O/ncu_dur_$tag.log 2>&1
  echo "ncu dur $tag rc=$?" >> $S
  ncu --import $O/dur_$tag.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_$tag.csv 2>&1
  st "ab $tag" 100 env DATTN_LIBRARY=$lib python3 bench/gpu_lib_ab.py run --tag $tag --dir $O/ab
done
DATTN_LIBRARY=build/libdattn.so timeout 100 ncu --profile-from-start off -k "regex:dattn_bwd_tc3" --section SpeedOfLight --section WarpStateStats \
  --section SourceCounters --import-source yes -f -o $O/src_new python3 bench/gpu_prof_target.py --shapes 32x512 --no-flash > $O/ncu_src.log 2>&1
echo "ncu src rc=$?" >> $S
ncu --import $O/src_new.ncu-rep --page source --csv --print-source sass -k "regex:dattn_" > $O/source.csv 2>&1; gzip -f $O/source.csv
rm -f $O/*.ncu-rep
python3 bench/gpu_lib_ab.py compare --dir $O/ab --base base --new new --json $O/ab.json > $O/ab.txt 2>&1
rm -f $O/ab/*_grads.pt
echo "done at $(( $(date +%s) - t0 ))s" >> $S
cat $S; cat $O/ab.txt | tail -9
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
for tag in ("base", "new"):
    rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
    hdr = rows[0]; ki = hdr.index("Kernel Name"); di = hdr.index("gpu__time_duration.sum")
    print(tag, [(r[ki][-8:], r[di]) for r in rows[2:]])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
