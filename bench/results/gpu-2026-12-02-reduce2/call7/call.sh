DATTN_GIT_COMMIT=319e3c6 sh scripts/gpu_check.sh --no-train > $OUT/stdout.log 2>&1; echo rc=$?; tail -40 $OUT/stdout.log
