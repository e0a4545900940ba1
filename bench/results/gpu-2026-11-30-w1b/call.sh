#!/bin/sh
# call 7 (x1): the runner alone on the merged tree (tc3 default backward, sm90w1b lean forward as a pinned path)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/check
GPU_CHECK_BUDGET=${B:-500} JOBS=16 OUT=$O/check sh scripts/gpu_check.sh > $O/check/stdout.txt 2>&1; echo "check rc=$?"
cat $O/check/summary.txt
grep -E "tc2|tc3|fwd\+bwd" $O/check/gpu_check.log | grep -E "^ *(B=|tc)" | head -12
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
