#!/bin/sh
# Forward paths pinned by DATTN_CUDA_FWD, checked and timed in one GPU call (the form of the
# calls in bench/results/gpu-2026-12-02-wsfwd/call6, call7): builds the library and the tests
# for sm_90a, then all at once: test_cuda_fwd --path P for each P of FWD_PATHS (each path's own
# sweep where it has one, then every case it can run pinned there), the default sweep, and
# compute-sanitizer memcheck / racecheck / synccheck on --path P --quick for each P; then
# bench/gpu_bench.py --op-only (its forced columns time every pinned path against the default,
# flash and cuDNN in the same run) at issue 4's shapes, and once more at FWD_PATHS_X_SHAPES
# (default 24x640,16x1024,12x1408: the default's crossover to ws). Run on the GPU machine from
# the repository root:
#
#   DATTN_GIT_COMMIT=<sha> sh scripts/gpu_fwd_paths.sh
#   FWD_PATHS="ws wsk" sh scripts/gpu_fwd_paths.sh       (default: ws wsk wsg wskg wsp)
#   FWD_PATHS_BUDGET=570   seconds for the whole call (the tests get at most 300 of them, each
#                          bench what is left, a bench with under 40 s left is skipped)
#   FWD_PATHS_NO_BENCH=1 ...                               (tests and sanitizers only)
#
# Writes under $OUT (default gpu-out/paths), 7 files in one folder (the device tool returns 8:
# room for the call's stdout): env.txt, build.log, tests.txt (every test log's counts, FAIL lines
# and sanitizer summaries, then the ws kernels' registers and spills), bench.log, bench.json,
# bench_x.log, bench_x.json. Prints one line per test log and the bench's ws tables. Within
# FWD_PATHS_BUDGET (the build about 1 minute, the tests 2-5, the benches the rest).
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-gpu-out/paths}
mkdir -p "$O"
P=${FWD_PATHS:-ws wsk wsg wskg wsp}
BUDGET=${FWD_PATHS_BUDGET:-570}
left() { echo $((BUDGET - ($(date +%s) - t0))); }
A=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${DATTN_GIT_COMMIT:-?}"; echo "paths: $P"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; } >"$O/env.txt" 2>&1
t0=$(date +%s)
make -j"${JOBS:-16}" CUDA=1 CUDA_ARCHS="$A" NVCCFLAGS="-Xptxas -v" lib tests-build >"$O/build.log" 2>&1
rc=$?
echo "build rc $rc $(($(date +%s) - t0))s"
[ $rc -eq 0 ] || { tail -30 "$O/build.log"; exit 1; }
T=build/tests/test_cuda_fwd
L=$(mktemp -d)
seed=301
TT=$(left); [ "$TT" -gt 300 ] && TT=300
for p in $P; do
  (OMP_NUM_THREADS=3 timeout $TT $T --path "$p" --seed $seed >"$L/t_$p.log" 2>&1; echo "rc $?" >>"$L/t_$p.log") &
  seed=$((seed + 1))
done
(OMP_NUM_THREADS=3 timeout $TT $T --seed $seed >"$L/t_default.log" 2>&1; echo "rc $?" >>"$L/t_default.log") &
if command -v compute-sanitizer >/dev/null 2>&1; then
  for p in $P; do
    for tool in memcheck racecheck synccheck; do
      (OMP_NUM_THREADS=1 timeout $TT compute-sanitizer --tool $tool --error-exitcode 9 $T --path "$p" --quick --seed 7 \
        >"$L/san_${tool}_$p.log" 2>&1; echo "rc $?" >>"$L/san_${tool}_$p.log") &
    done
  done
fi
wait
echo "tests done $(($(date +%s) - t0))s"
for f in "$L"/t_*.log "$L"/san_*.log; do
  [ -f "$f" ] || continue
  echo "$(basename "$f" .log): $(grep -E '^[0-9]+ passed' "$f" | tail -1) $(grep -E 'ERROR SUMMARY' "$f" | tail -1) $(tail -1 "$f"), $(grep -c '^FAIL' "$f") FAIL lines"
done | tee "$O/tests.txt"
bad=$(grep -vc ' rc 0,' "$O/tests.txt")
for f in "$L"/t_*.log "$L"/san_*.log; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"
  grep -E "^FAIL|passed|ERROR SUMMARY|Race reported|UNSUPPORTED|^rc" "$f" | head -20
done >>"$O/tests.txt"
{ echo "== registers and spills of the ws kernels (ptxas -v)"; grep -A3 "dattn_fwd_ws" "$O/build.log" | grep -E "entry|Used|spill"
  echo "== ptxas wgmma serialization notes (C7510-C7519), all kernels"; grep -E "C751[0-9]" "$O/build.log" | sort | uniq -c; } >>"$O/tests.txt"
rm -rf "$L"
if [ "${FWD_PATHS_NO_BENCH:-0}" != 1 ] && [ "$(left)" -ge 40 ]; then
  timeout $(($(left) > 200 ? 200 : $(left))) env DATTN_LIBRARY="$(pwd)/build/libdattn.so" python3 bench/gpu_bench.py --json "$O/bench.json" --op-only \
    >"$O/bench.log" 2>&1
  echo "bench rc $?"
  sed -n '/^shape  *dattn  *ws /,/^default path/p' "$O/bench.log"
  # the default's crossover to ws (FWD_WS_MIN_L, 384 from gpu-2026-12-03-wsl384/c1): B L = 16K tokens between 512 and 2048
  [ "$(left)" -ge 40 ] && timeout $(left) env DATTN_LIBRARY="$(pwd)/build/libdattn.so" python3 bench/gpu_bench.py --json "$O/bench_x.json" --op-only \
    --shapes "${FWD_PATHS_X_SHAPES:-24x640,16x1024,12x1408}" >"$O/bench_x.log" 2>&1
  echo "crossover bench rc $?"
  sed -n '/^shape  *dattn  *ws /,/^default path/p' "$O/bench_x.log"
fi
echo "total $(($(date +%s) - t0))s"
[ "$bad" -eq 0 ] # (exit status: every test log ended rc 0)
