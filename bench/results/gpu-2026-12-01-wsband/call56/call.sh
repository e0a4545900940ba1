#!/bin/sh
# call 56 (x1): scripts/gpu_proto.sh on the committed prototype (band tiles, default order), the
# result to commit as bench/results/gpu-2026-12-01-wsband
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python DATTN_GIT_COMMIT=b2ceb82c5f9b648cadd21a5567ddbb7719d122e4
OUT=$OUT/res sh scripts/gpu_proto.sh
cat $OUT/res/proto/env.txt; grep "ms per call" $OUT/res/proto/bench.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
