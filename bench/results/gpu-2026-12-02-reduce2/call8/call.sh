DATTN_GIT_COMMIT=319e3c6 sh scripts/gpu_check.sh --train > $OUT/train_stdout.log 2>&1; echo rc=$?; tail -30 $OUT/train_stdout.log
