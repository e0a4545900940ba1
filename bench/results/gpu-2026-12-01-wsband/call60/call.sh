#!/bin/sh
# call 60 (x1): scripts/gpu_proto.sh on the prototype with the band table gradients (deterministic flush),
# then racecheck / synccheck on its --check
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=python DATTN_GIT_COMMIT=05e863d648dcc14b9854bf6206df148b1f27ec8d
OUT=$OUT/res sh scripts/gpu_proto.sh
O=$OUT/res/proto
for tool in racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/bench/proto_ws_bwd --check > $O/san_$tool.log 2>&1
  echo "san $tool rc=$? $(tail -2 $O/san_$tool.log | tr '\n' ' ')" >> $O/summary.txt
done
cat $O/summary.txt; grep "ms per call" $O/bench.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
