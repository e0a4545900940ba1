#!/bin/sh
# call 29 (x2), the session's final check on main (forward default sm90w1g / sm90w1h at L <= 512,
# backward default tc3g, the lean projections node). GPU 0: build, SASS check, test_wgmma,
# test_dropout, the full forward sweep on the default and on sm90w1g pinned (bitwise sm90w1h),
# the full backward sweep on the default and tc3g pinned bitwise against tc3f, the dropout sweep
# on the mma.sync forward, sanitizers (forward and backward --quick, the backward dropout sweep),
# parity, pytest -k cuda, finetune-e2e, the demo. GPU 1 after the build: DDP fp32 + bf16 (both
# GPUs), then the bwd bench with DATTN_CUDA_BWD=tc3f as its "default" (the tc3g A/B).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/bench $O/ddp
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-52s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 300 make -j32 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "registers|spill" $L | grep -i "bwd\|fwd" | sort | uniq -c | head -80 > $O/check/resources.txt
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
echo "build done at $(( $(date +%s) - t0 ))s"
(
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  OUT=$O/ddp b ddp 200 sh scripts/gpu_ddp.sh
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bwd_bench_tc3f_default 200 env DATTN_CUDA_BWD=tc3f python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
) &
pb=$!
export CUDA_VISIBLE_DEVICES=0
st test_wgmma 60 build/tests/test_wgmma
st test_dropout 60 build/tests/test_dropout
st "test_cuda_fwd (default)" 150 build/tests/test_cuda_fwd
st "test_cuda_fwd --path sm90w1g --same-as sm90w1h" 150 build/tests/test_cuda_fwd --path sm90w1g --same-as sm90w1h
st "test_cuda_bwd (default tc3g)" 150 build/tests/test_cuda_bwd
st "test_cuda_bwd --path tc3g --same-as tc3f" 150 build/tests/test_cuda_bwd --path tc3g --same-as tc3f
st "DATTN_CUDA_FWD=sm80 test_cuda_bwd --sweep dropout" 90 env DATTN_CUDA_FWD=sm80 build/tests/test_cuda_bwd --sweep dropout
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(fwd --quick)" 100 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_fwd --quick --seed 7
done
for tool in memcheck racecheck synccheck; do
  st "san-$tool(bwd --quick)" 100 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
done
st "san-racecheck(bwd --sweep dropout --max-l 140)" 100 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --sweep dropout --max-l 140 --seed 7
export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
st "parity" 150 python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 150 python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
st "finetune-e2e" 150 python3 scripts/finetune_e2e.py --device cuda --json $O/check/finetune_e2e.json
st "demo(cuda)" 120 python3 -m dattn demo --device cuda --quiet
echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $S $O/bench/summary.txt
grep -hE "ddp_check: (PASS|FAIL)|gpu_ddp:|max rel" $O/ddp/*.log 2>/dev/null | head -12
grep -E "^finetune_e2e" $L | tail -3
grep -E "^B=|tc3g" $O/bench/bwd_bench_tc3f_default.log | head -16
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
