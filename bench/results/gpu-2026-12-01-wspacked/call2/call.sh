#!/bin/sh
# call 2: the GPU runner without its training tail (gpu_check.sh --no-train) on the commit under test
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/check
GPU_CHECK_BUDGET=${B:-560} OUT=$O/check sh scripts/gpu_check.sh --no-train > $O/gpu_check_stdout.log 2>&1
echo "rc=$?" >> $O/gpu_check_stdout.log
tail -70 $O/gpu_check_stdout.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
