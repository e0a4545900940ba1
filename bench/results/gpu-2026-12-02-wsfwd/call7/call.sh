# calls 7-10 ran these commands through the device tool (warm machine, the build of call 6 kept), on
# the working tree of 68252b8 with FWD_WS_MIN_L 1024 in src/cuda/launch.cu (committed next):
# call 7:
A="-gencode=arch=compute_90a,code=sm_90a"; make -j16 CUDA=1 CUDA_ARCHS="$A" lib tests-build > $OUT/build.log 2>&1
( timeout 200 build/tests/test_cuda_fwd --seed 401 > $OUT/t_default.log 2>&1 ) &
( timeout 200 env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so python3 bench/gpu_parity.py --json $OUT/parity.json > $OUT/parity.log 2>&1 ) & wait
# call 8:
timeout 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so python3 bench/gpu_bench.py --json $OUT/bench.json --op-only > $OUT/bench.log 2>&1
# call 9:
timeout 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python > $OUT/pytest.log 2>&1
# call 10:
timeout 100 env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python python3 -m dattn demo --device cuda --quiet > $OUT/demo.log 2>&1
