#!/bin/sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/check
GPU_CHECK_BUDGET=${B:-530} OUT=$O/check sh scripts/gpu_check.sh
cat $O/check/summary.txt
grep -A12 "fp32" $O/check/gpu_check.log | grep -E "f32|simple|TF/s" | tail -8
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
