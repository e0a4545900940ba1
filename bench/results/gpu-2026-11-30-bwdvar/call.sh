#!/bin/sh
# call 13 (x2): the backward variants. GPU 0: build, test_cuda_bwd default + pinned tc3 /
# tc3p / tc3s / tc3k (whichever the tree has), compute-sanitizer on each, pytest -k cuda,
# parity. GPU 1 after the build: DDP (fp32 + bf16, both GPUs), bwd bench, train bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/bench $O/ddp
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-40s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 240 make -j32 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "registers|spill" $L | grep -i "bwd" | sort | uniq -c | head -40 > $O/check/bwd_resources.txt
echo "build done at $(( $(date +%s) - t0 ))s"
(
  export CUDA_VISIBLE_DEVICES=1
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  ( unset CUDA_VISIBLE_DEVICES; OUT=$O/ddp b ddp 150 sh scripts/gpu_ddp.sh )
  export DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bwd_bench 120 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  b train_bench 150 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
) &
pb=$!
export CUDA_VISIBLE_DEVICES=0
V=$(for p in tc3p tc3s tc3k; do grep -q "\"$p\"" tests/test_cuda_bwd.c && echo $p; done)
echo "variants: $V"
st "test_cuda_bwd (default)" 120 build/tests/test_cuda_bwd
st "test_cuda_bwd --path tc3 --same-as tc3b" 120 build/tests/test_cuda_bwd --path tc3 --same-as tc3b
for p in $V; do st "test_cuda_bwd --path $p" 120 build/tests/test_cuda_bwd --path $p; done
for p in "" $V; do
  a=""; [ -n "$p" ] && a="--path $p"
  for tool in memcheck racecheck synccheck; do
    st "san-$tool(bwd $a)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd $a --quick --seed 7
  done
done
st "san-initcheck(bwd)" 90 compute-sanitizer --tool initcheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
st "parity" 120 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 bench/gpu_parity.py --json $O/check/parity.json
st "pytest(cuda)" 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $S $O/bench/summary.txt
grep -E "passed, " $L | tail -12
grep -hE "ddp_check: (PASS|FAIL)|gpu_ddp:|max rel|fast_bwd|backward kernels" $O/ddp/*.log 2>/dev/null | head -12
grep -E "B=|tc3|diag|kind" $O/bench/bwd_bench.log | head -40
grep -E "ratio" $O/bench/train_bench.log | head -6
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
