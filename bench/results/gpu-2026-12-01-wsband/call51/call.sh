#!/bin/sh
# call 51 (x1): scripts/gpu_proto.sh (the ws prototype pair: check, bench, ncu vs library and
# flash at R0 and R512), then the prototype's --check under racecheck / synccheck / memcheck.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python
OUT=$OUT/res sh scripts/gpu_proto.sh
O=$OUT/res/proto
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/bench/proto_ws_bwd --check > $O/san_$tool.log 2>&1
  echo "san $tool rc=$? $(tail -2 $O/san_$tool.log | tr '\n' ' ')" >> $O/summary.txt
done
cat $O/summary.txt $O/check.log $O/bench.log $O/resources.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
