#!/bin/sh
# call 48 (x1): the flush staged by its own cp.async group, waited for with wait_group 1
# (working tree) against ebb35e1 (.gpu/a): ncu kernel durations of the default backward (tc3g),
# gradients bit for bit, the quick backward sweep and racecheck / synccheck on the new build.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O/ab
t0=$(date +%s)
S=$O/summary.txt; L=$O/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-40s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
A="-gencode=arch=compute_90a,code=sm_90a"
( cd .gpu/a && make -j4 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_base.log 2>&1; echo "build base rc=$?" >> $S ) &
st build 150 make -j12 CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build
wait
grep -E "Compiling entry|registers|spill" $L | grep -A1 "dattn_bwd_tc3[fgt]" > $O/resources_bwd.txt
st "test_cuda_bwd --quick (default)" 60 build/tests/test_cuda_bwd --quick --seed 101
st "test_cuda_bwd --path tc3g --same-as tc3f --quick" 60 build/tests/test_cuda_bwd --path tc3g --same-as tc3f --quick --seed 102
for tag in base new; do
  lib=build/libdattn.so; [ $tag = base ] && lib=.gpu/a/build/libdattn.so
  DATTN_LIBRARY=$lib timeout 90 ncu --profile-from-start off -k "regex:dattn_bwd" --section SpeedOfLight -f -o $O/dur_$tag \
    python3 bench/gpu_prof_target.py --shapes 32x512,8x2048,2x8192 --no-flash > $O/ncu_dur_$tag.log 2>&1
  echo "ncu dur $tag rc=$? $(( $(date +%s) - t0 ))s" >> $S
  ncu --import $O/dur_$tag.ncu-rep --page raw --csv --metrics gpu__time_duration.sum > $O/dur_$tag.csv 2>&1
  st "ab $tag" 60 env DATTN_LIBRARY=$lib python3 bench/gpu_lib_ab.py run --tag $tag --dir $O/ab
done
rm -f $O/*.ncu-rep
python3 bench/gpu_lib_ab.py compare --dir $O/ab --base base --new new --json $O/ab.json > $O/ab.txt 2>&1
rm -f $O/ab/*_grads.pt
for tool in racecheck synccheck; do
  st "san-$tool(bwd --quick)" 150 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 103
done
echo "done at $(( $(date +%s) - t0 ))s" >> $S
cat $S; tail -8 $O/ab.txt 2>/dev/null
python3 - $O <<'PY'
import csv, sys, os
o = sys.argv[1]
d = {}
for tag in ("base", "new"):
    try:
        rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
        hdr = rows[0]; ki = hdr.index("Kernel Name"); di = hdr.index("gpu__time_duration.sum")
        d[tag] = [float(r[di]) for r in rows[2:] if "reduce" not in r[ki]]
        print(tag, d[tag])
    except Exception as e:
        print(tag, "no durations", e)
if len(d) == 2:
    print("new/base", [round(n / b, 4) for n, b in zip(d["new"], d["base"])])
PY
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
