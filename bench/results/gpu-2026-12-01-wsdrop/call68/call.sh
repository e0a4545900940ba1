#!/bin/sh
# call 68 (x1): the GPU runner on the ws HF-dropout + reduce commit (tc2 re-runs dropped from the default); see call 67 for the
# dropout kernels' commit: every test, sanitizer, parity, bench and training step in one call
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/check
GPU_CHECK_BUDGET=${B:-555} OUT=$O/check sh scripts/gpu_check.sh > $O/gpu_check_stdout.log 2>&1
echo "rc=$?" >> $O/gpu_check_stdout.log
tail -90 $O/gpu_check_stdout.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
