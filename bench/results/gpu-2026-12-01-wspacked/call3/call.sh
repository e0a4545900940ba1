#!/bin/sh
# call 3: the GPU runner's training part (gpu_check.sh --train: pytest of test_train.py on CUDA,
# train-bench, finetune-e2e) on the commit under test, then a same-run A/B against main 9b2fe5a
# (bench/gpu_lib_ab.py, 2 rounds alternated: padded shapes = the reduce change, packed rows = ws
# against main's tc3g) and the reduce kernels' own durations under ncu (both libraries)
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/train $O/ab
A="-gencode=arch=compute_90a,code=sm_90a"
rm -rf /tmp/old && cp -r .gpu/old /tmp/old
(cd /tmp/old && make -j6 CUDA=1 CUDA_ARCHS="$A" BUILD=/tmp/oldb lib > $O/oldbuild.log 2>&1; echo "old rc $?" >> $O/oldbuild.log) &
GPU_CHECK_BUDGET=${B:-330} OUT=$O/train sh scripts/gpu_check.sh --train > $O/train_stdout.log 2>&1
echo "rc=$?" >> $O/train_stdout.log
tail -25 $O/train_stdout.log
wait; tail -1 $O/oldbuild.log
D=$O/ab
for i in 1 2; do
  DATTN_LIBRARY=/tmp/oldb/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag main --dir $D > $D/run_main_$i.log 2>&1
  DATTN_LIBRARY=build/libdattn.so PYTHONPATH=python python3 bench/gpu_lib_ab.py run --tag new --dir $D > $D/run_new_$i.log 2>&1
done
python3 bench/gpu_lib_ab.py compare --dir $D --base main --new new --json $O/ab.json 2>&1 | tee $O/ab.txt
rm -f $D/*.pt
for lib in main new; do
  so=build/libdattn.so; [ $lib = main ] && so=/tmp/oldb/libdattn.so
  for shp in "8 512" "2 8192"; do
    DATTN_LIBRARY=$so timeout 120 ncu --clock-control none -k regex:ws_reduce --metrics gpu__time_duration.sum --csv \
      python3 .gpu/red_probe.py $shp > $O/ncu_reduce_${lib}_$(echo $shp | tr ' ' x).csv 2>&1
    echo "$lib B,L=$shp: $(grep -c gpu__time_duration $O/ncu_reduce_${lib}_$(echo $shp | tr ' ' x).csv) launches, us: $(grep gpu__time_duration $O/ncu_reduce_${lib}_$(echo $shp | tr ' ' x).csv | awk -F'","' '{print $NF}' | tr -d '"' | tr '\n' ' ')"
  done
done | tee $O/ncu_reduce.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
