#!/bin/sh
# call 9: bench/proto_ws_fwd.cu (the ws forward's plain core) on the GPU: --check, racecheck /
# synccheck on it, --bench at the op-level shapes with 2 and 3 K / V stages, torch SDPA flash /
# cuDNN forward at the same shapes in the same call
set -u
O=$OUT; T0=$(date +%s)
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${DATTN_GIT_COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $O/env.txt
F="-std=c++17 -O3 -Iinclude -Isrc/cuda -Itests --expt-relaxed-constexpr -DDATTN_WITH_CUDA -gencode=arch=compute_90a,code=sm_90a -Xptxas -warn-spills -lcuda"
nvcc $F -o /tmp/pf3 bench/proto_ws_fwd.cu > $O/build.log 2>&1 &
nvcc $F -DPROTO_FWD_NST=2 -o /tmp/pf2 bench/proto_ws_fwd.cu >> $O/build.log 2>&1 &
wait; echo "build $(( $(date +%s) - T0 )) s"; cat $O/build.log
timeout 60 /tmp/pf3 --check 2>&1 | tee $O/check.log
for tool in racecheck synccheck; do timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/pf3 --check > $O/san_$tool.log 2>&1; echo "$tool rc $? $(grep -E 'passed|ERROR SUMMARY' $O/san_$tool.log | tr '\n' ' ')"; done
for r in 1 2; do for p in 3 2; do for s in "32 512" "8 2048" "2 8192"; do timeout 30 /tmp/pf$p --bench $s 50; done; done; done 2>&1 | grep proto_ws_fwd | tee $O/bench.log
timeout 60 python3 .gpu/sdpa_ref.py 2>&1 | tee $O/sdpa.log
echo "call seconds: $(( $(date +%s) - T0 ))"
