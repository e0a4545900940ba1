#!/bin/sh
# call 33 (x1): the balanced flush + single-write linear scatter (working tree) against main
# 43c1030 (.gpu/base: Makefile, src, include of that commit): both libraries built; the
# backward sweep, pinned tc3 path, sanitizers on the new build; then three alternating rounds
# of bench/gpu_lib_ab.py (times + gradients bit for bit).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
S=$O/summary.txt; L=$O/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-90)" >> $S; }
A="-gencode=arch=compute_90a,code=sm_90a"
( make -j12 CUDA=1 CUDA_ARCHS="$A" lib tests-build > $O/build_new.log 2>&1; echo "build new rc=$?" >> $S ) &
( cd .gpu/base && make -j4 CUDA=1 CUDA_ARCHS="$A" lib > $O/build_base.log 2>&1; echo "build base rc=$?" >> $S ) &
wait
echo "builds done $(( $(date +%s) - t0 ))s" >> $S
grep -E "spill|lmem" $O/build_new.log | grep -v " 0 bytes" | head -5 >> $S
st "test_cuda_bwd (default)" 200 build/tests/test_cuda_bwd --seed 31
st "test_cuda_bwd --path tc3 --same-as tc3b" 200 build/tests/test_cuda_bwd --path tc3 --same-as tc3b --seed 32
st "test_cuda_bwd --path tc3e --same-as tc3f --quick" 100 build/tests/test_cuda_bwd --path tc3e --same-as tc3f --quick --seed 33
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(bwd --quick)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 5
done
st "san-racecheck(bwd --sweep positions --max-l 200)" 150 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --sweep positions --max-l 200 --seed 6
for r in 1 2 3; do
  st "ab base $r" 150 env DATTN_LIBRARY=.gpu/base/build/libdattn.so python3 bench/gpu_lib_ab.py run --tag base --dir $O/ab
  st "ab new $r" 150 env DATTN_LIBRARY=build/libdattn.so python3 bench/gpu_lib_ab.py run --tag new --dir $O/ab
done
python3 bench/gpu_lib_ab.py compare --dir $O/ab --base base --new new --json $O/ab.json > $O/ab.txt 2>&1
rm -f $O/ab/*_grads.pt
echo "done at $(( $(date +%s) - t0 ))s" >> $S
cat $S; cat $O/ab.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
