#!/bin/sh
# GPU runner: build, CUDA C tests, compute-sanitizer, SASS check, pytest on CUDA,
# benchmarks. Everything is logged under $OUT (default gpu-out/); a short summary table
# is printed last. Each step has its own time limit so that one run stays under ~9 min.
#
#   sh scripts/gpu_check.sh [--quick] [--no-bench] [--no-san] [--train | --no-train]
#   --no-bench: no timing steps (bench, bwd-bench, train-bench, host-step-ab): tests, sanitizers, parity,
#            pytest, finetune-e2e and the demo only
#   --train: only the Python steps (build, pytest of tests/python on CUDA, the forward bench,
#            bwd-bench, train-bench, finetune-e2e, host-step-ab, the demo), about 6-7 min
#   --no-train: everything else: the C tests, sanitizers, SASS checks and parity (about 8.5
#            min on a cold machine). The whole runner no longer fits one
#            10-minute device call: run it as two calls on one commit, `--no-train` then
#            `--train` (each writes its own summary under its own OUT)
#   CUDA_ARCHS="-gencode=..."  (default: sm_90a only, for speed on the H200)
#   GPU_CHECK_BWD_PATHS="tc3g ..."  backward paths swept and sanitized again after the
#            default (default "tc3g"; the default itself is the ws kernels on the H200)
#   GPU_CHECK_PATHS="sm80 ..."  forward paths swept again (default "sm80 sm90w1g sm90w1h wskg")
#   GPU_CHECK_SAN_FWD_PATHS="..."  forward paths sanitized again (default "sm90w1g ws wskg wskgt")
#   GPU_CHECK_BUDGET=520  seconds for the whole run (steps are cut to fit it)
#   GPU_CHECK_SKIP="bench demo(cuda)"  step names not to run this time (when device time is short:
#            e.g. the forward bench when no kernel changed since its last committed run); the
#            summary lists them as SKIPPED-BY-ENV, so a run with skips is never read as whole.
#            Names are separated by spaces, or by ';' when one has a space in it
#            ("test_cuda_fwd --path sm80; bench"); a name skips only the step of exactly that name
#   JOBS=16
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
QUICK=0 BENCH=1 SAN=1 TRAIN=0 NOTRAIN=0
for a in "$@"; do
  case $a in
    --quick) QUICK=1 ;;
    --no-bench) BENCH=0 ;;
    --no-san) SAN=0 ;;
    --train) TRAIN=1 ;;
    --no-train) NOTRAIN=1 ;;
    *) echo "gpu_check.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
if [ $TRAIN -eq 1 ] && [ $NOTRAIN -eq 1 ]; then
  echo "gpu_check.sh: --train and --no-train exclude each other" >&2
  exit 2
fi
: >"$LOG"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
t_start=$(date +%s)
# whole-run budget (seconds): steps are cut to fit it
BUDGET=${GPU_CHECK_BUDGET:-520}
DEADLINE=$((t_start + BUDGET))

log() { echo "$*" | tee -a "$LOG"; }
# The backward paths whose whole sweep and compute-sanitizer runs repeat the default ones (3a,
# 4): GPU_CHECK_BWD_PATHS, default "tc3g" (the D 64 default where the ws kernels do not run:
# packed calls, tensors TMA cannot map). The round-2 kernels (tc2) serve D 128, which the default
# sweep runs on them already (at D 64 nothing routes to them: the tensor-core backward is built for
# sm_90, where tc3g / ws take D 64); the kernels on the GPU time-slice between processes, so their
# sweep (~145 s) and sanitizer runs (~160 s) side by side still cost that device time, and the
# runner fits one device call without them. The other names are opt-in A/B variants (tc2 tc3 tc3b
# tc3p tc3s tc3k tc3c tc3d tc3e tc3t; wsr: the ws kernels with the rings filled row by row, the
# form before the expanded tables, every backward again on ws and bitwise equal). GPU_CHECK_SAN_FWD_PATHS likewise for the forward's
# per-path sanitizer runs (default sm90w1g: the L > 512 instance of the default; the default-path
# runs take sm90w1h at their small L).
BWD_PATHS=${GPU_CHECK_BWD_PATHS:-tc3g}
# skip_named NAME: is NAME one of GPU_CHECK_SKIP's names? Whole names only: with the list split
# on spaces, "test_cuda_fwd --path sm80" once skipped the step "test_cuda_fwd" too
# (gpu-2026-12-07-chain/call2-notrain).
skip_named() {
  case ${GPU_CHECK_SKIP:-} in
    *\;*) sep=';' ;;
    *) sep=' ' ;;
  esac
  old_ifs=$IFS; IFS=$sep
  set -f
  hit=1
  for entry in ${GPU_CHECK_SKIP:-}; do
    entry=${entry#"${entry%%[! ]*}"}; entry=${entry%"${entry##*[! ]}"} # (spaces trimmed)
    [ -n "$entry" ] && [ "$entry" = "$1" ] && hit=0 && break
  done
  IFS=$old_ifs; set +f
  return $hit
}
# step NAME LIMIT_S CMD...: runs CMD with a time limit, output appended to the log,
# records "NAME status seconds" in the summary.
step() {
  name=$1; lim=$2; shift 2
  if skip_named "$name"; then
    log "==== $name: not run (GPU_CHECK_SKIP)"
    printf '%-28s %-14s\n' "$name" "SKIPPED-BY-ENV" >>"$SUMMARY"
    return 0
  fi
  left=$((DEADLINE - $(date +%s)))
  if [ $left -lt 20 ]; then
    log "==== $name: not run (global time budget spent)"
    printf '%-28s %-14s\n' "$name" "NOT-RUN" >>"$SUMMARY"
    return 0
  fi
  [ $lim -gt $left ] && lim=$left
  log "==== $name ($(date -u +%H:%M:%S), limit ${lim}s): $*"
  t0=$(date +%s)
  timeout -k 10 "$lim" "$@" >>"$LOG" 2>&1
  rc=$?
  t1=$(date +%s)
  st=ok
  [ $rc -eq 0 ] || st="FAIL(rc=$rc)"
  [ $rc -eq 124 ] && st="TIMEOUT"
  [ $rc -eq 77 ] && st="skipped"
  log "==== $name: $st in $((t1 - t0))s"
  printf '%-28s %-14s %5ss\n' "$name" "$st" "$((t1 - t0))" >>"$SUMMARY"
  return $rc
}
# pstep NAME LIMIT_S CMD...: step in the background (the correctness sweeps and the sanitizer runs
# are bound by the float64 reference on one CPU core each, so they run side by side on the
# device machine's cores; timing steps never do). Its log and summary lines go to files of their
# own, appended in launch order by pwait (which waits for every pending pstep), with the "N
# passed, N failed" line of its output.
PN=0
PDIR=$OUT/par
rm -rf "$PDIR"
mkdir -p "$PDIR"
pstep() {
  PN=$((PN + 1))
  (
    LOG=$PDIR/$PN.log SUMMARY=$PDIR/$PN.sum
    : >"$LOG"
    : >"$SUMMARY"
    step "$@"
    grep -E "^[0-9]+ passed, [0-9]+ failed" "$LOG" | tail -1 >>"$SUMMARY"
  ) &
}
pwait() {
  wait
  i=1
  while [ $i -le $PN ]; do
    [ -f "$PDIR/$i.log" ] && cat "$PDIR/$i.log" >>"$LOG"
    [ -f "$PDIR/$i.sum" ] && cat "$PDIR/$i.sum" >>"$SUMMARY"
    i=$((i + 1))
  done
  rm -f "$PDIR"/*.log "$PDIR"/*.sum
  PN=0
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: sh scripts/gpu_check.sh $*"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat GIT_COMMIT 2>/dev/null || echo none)}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  which compute-sanitizer cuobjdump 2>&1
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt" >>"$LOG"

# 1. build (resource usage of every kernel goes to build.log)
if [ $TRAIN -eq 1 ]; then
  step build 300 make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" lib
else
  step build 300 make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" NVCCFLAGS="-Xptxas -v" lib tests-build
fi
grep -E "Compiling entry|registers|spill" "$LOG" | grep -B1 -A1 "dattn_fwd_sm80\|dattn_fwd_sm90\|dattn_fwd_simple\|dattn_bwd_\|dattn_fwd_padrows" >"$OUT/resources.txt" 2>/dev/null

# 2. SASS: tensor-core instructions present, no local memory
if [ $TRAIN -eq 0 ]; then
(
  for o in build/src/cuda/fwd_sm80_d*.o; do
    n_hmma=$(cuobjdump -sass "$o" 2>/dev/null | grep -c HMMA)
    n_ldsm=$(cuobjdump -sass "$o" 2>/dev/null | grep -c LDSM)
    n_lmem=$(cuobjdump -sass "$o" 2>/dev/null | grep -cE "LDL|STL")
    echo "$o: HMMA $n_hmma LDSM $n_ldsm LDL/STL $n_lmem"
    [ "$n_hmma" -gt 0 ] && [ "$n_lmem" -eq 0 ] || exit 1
  done
  # the Hopper kernels: wgmma (HGMMA) present, no local memory
  for o in build/src/cuda/*_sm90.o; do
    [ -f "$o" ] || continue
    n_hgmma=$(cuobjdump -sass "$o" 2>/dev/null | grep -c HGMMA)
    n_lmem=$(cuobjdump -sass "$o" 2>/dev/null | grep -cE "LDL|STL")
    echo "$o: HGMMA $n_hgmma LDL/STL $n_lmem"
    [ "$n_hgmma" -gt 0 ] && [ "$n_lmem" -eq 0 ] || exit 1
  done
) >"$OUT/sass.txt" 2>&1
rc=$?; cat "$OUT/sass.txt" >>"$LOG"
printf '%-28s %-14s\n' "sass(HMMA/HGMMA, no LDL/STL)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" >>"$SUMMARY"
fi

# 2b. the Hopper wgmma layer alone (descriptors, swizzle, fragments; tests/test_wgmma.cu):
#     if this fails, the sm_90a kernel results below are meaningless
if [ $TRAIN -eq 0 ] && [ -x build/tests/test_wgmma ]; then
  step test_wgmma 60 build/tests/test_wgmma
  grep -E "^[0-9]+ passed, [0-9]+ failed" "$LOG" | tail -1 >>"$SUMMARY"
fi
# 2c. the TMA layer alone (tensor maps, bulk tensor loads on an mbarrier, 128-byte swizzle,
#     out-of-bounds zeros; tests/test_tma.cu): what the TMA loaders will stand on
if [ $TRAIN -eq 0 ] && [ -x build/tests/test_tma ]; then
  step test_tma 60 build/tests/test_tma
  grep -E "^[0-9]+ passed, [0-9]+ failed" "$LOG" | tail -1 >>"$SUMMARY"
fi
# 2d. the kernel prototypes of bench/ (bench/proto_*.cu, not in the library): their float64
#     checks (proto_ws_bwd: the warp-specialized backward core, dq and dkdv kernels: a TMA
#     producer, wgmma consumers, mbarrier stages), and compute-sanitizer racecheck /
#     synccheck on them
if [ $TRAIN -eq 0 ]; then
  for p in build/bench/proto_*; do
    [ -x "$p" ] || continue
    step "$(basename "$p") --check" 60 "$p" --check
    if [ $SAN -eq 1 ]; then
      for tool in racecheck synccheck; do
        step "san-$tool($(basename "$p"))" 120 compute-sanitizer --tool $tool --error-exitcode 9 "$p" --check
      done
    fi
  done
fi

# 3. CUDA C tests (full sweep): test_cuda_bwd (backward, dropout), test_cuda_fwd
#    (3 to 3c: side by side, pstep; collected by the pwait after 3c)
for t in build/tests/test_cuda_*; do
  [ $TRAIN -eq 1 ] && break
  case $t in *.o) continue ;; esac
  # (300 s: test_cuda_bwd's sweep takes 93 s alone on the H200, 180-240 s beside the others)
  if [ $QUICK -eq 1 ]; then pstep "$(basename "$t") --quick" 120 "$t" --quick
  else pstep "$(basename "$t")" 300 "$t"; fi
done
# 3a. the backward sweep again with each path of GPU_CHECK_BWD_PATHS pinned (DATTN_CUDA_BWD; the
#     default run above takes the ws kernels on an H200 where they apply and tc3g elsewhere at
#     D = 64): tc3g the D = 64 default where ws does not run; tc2 the round-2 kernels (D = 128
#     runs them in the default sweep) and the opt-in round-3 variants (tc3, tc3p, tc3k, tc3s, tc3c,
#     tc3d, tc3e, tc3t) on request. Every case against ref64; a variant with the same arithmetic
#     as another runs every backward again on that one and must be bitwise equal (--same-as):
#     tc3 and tc3p (tc3p: dq, dk, dpk, dpq only; dv against the P-rounding bound) on tc3b, tc3c on
#     tc3d, tc3d on tc3e, tc3e and tc3g on tc3f, tc3t on tc3g; tc3k and tc3s sum in another order
if [ $TRAIN -eq 0 ] && [ -x build/tests/test_cuda_bwd ]; then
  for pth in $BWD_PATHS; do
    case $pth in
      tc3|tc3p) same=tc3b ;; tc3c) same=tc3d ;; tc3d) same=tc3e ;; tc3e|tc3g) same=tc3f ;; tc3t) same=tc3g ;; wsr) same=ws ;; *) same= ;;
    esac
    lim=300; [ "$pth" = tc2 ] && lim=240
    set -- --path "$pth"; [ -n "$same" ] && set -- "$@" --same-as "$same"
    if [ $QUICK -eq 1 ]; then pstep "test_cuda_bwd --path $pth --quick" 120 build/tests/test_cuda_bwd "$@" --quick
    else pstep "test_cuda_bwd --path $pth" $lim build/tests/test_cuda_bwd "$@"; fi
  done
fi
# 3b. the forward sweep again with each other tensor-core kernel pinned (the default run
#     above takes, on an H200, the one-warpgroup lean-loop wgmma kernel with the pipelined band
#     products and the saturated constants through the score product (sm90w1g) at D = 64 and the mma.sync
#     kernel at D = 32 / 128; launch.cu DATTN_SM90_DEFAULT): --path sm80 (mma.sync, the path
#     of every other GPU), sm90 (two-warpgroup wgmma, 128-key tiles; a D=64/128 fp16/bf16 case
#     it cannot run fails instead of falling back), sm90n64 (its 64-key tiles), sm90w1ov
#     (one warpgroup, next K side loaded during the softmax), sm90w1 (one warpgroup without
#     the lean loop), sm90w1b (the lean loop without the pipelined band products: the
#     previous default), sm90w1d (sm90w1b with the saturated / plain tile order, opt-in;
#     every case again on sm90w1b and bitwise equal: --same-as sm90w1b), sm90w1e (sm90w1c
#     with the leaner band-tile overheads) and sm90w1f (sm90w1e with a band tile's K side
#     loaded during P V), both opt-in, every case again on sm90w1c and bitwise equal (--same-as
#     sm90w1c), and sm90w1c (the previous default: the default sm90w1g without the saturated p2c
#     constants through the score product, whose bf16 hi + lo makes it not bitwise; every case
#     again on sm90w1g with lse within 1e-5 relative: --same-as sm90w1g --lse-tol 1e-5), and the
#     default's two instances pinned at every L (the default takes sm90w1h at L <= 512, sm90w1g
#     above): sm90w1g, and sm90w1h bitwise against it (--same-as sm90w1g).
#     GPU_CHECK_PATHS sets the list (default: sm80 sm90w1g sm90w1h wskg, the other GPUs' path,
#     the default's two wgmma instances and the warp-specialized forward in the wskg form: its own
#     sweep, then every case it can run pinned to it, masked and packed ones included, which the
#     default does not route there yet; the default's wskgt form (wskg with the ring blocks by
#     TMA, on padded unmasked calls from L 384) runs in the default sweep; the plain ws pin and
#     the other ws variants are swept by scripts/gpu_fwd_paths.sh: with ws here too the nine
#     sweeps side by side slowed test_cuda_bwd past its limit, gpu-2026-12-03-wskg/call1).
if [ $TRAIN -eq 0 ] && [ -x build/tests/test_cuda_fwd ]; then
  for pth in ${GPU_CHECK_PATHS:-sm80 sm90w1g sm90w1h wskg}; do
    arg="--path $pth"; [ "$pth" = sm90w1d ] && arg="$arg --same-as sm90w1b"
    case $pth in sm90w1e|sm90w1f) arg="$arg --same-as sm90w1c" ;; sm90w1c) arg="$arg --same-as sm90w1g --lse-tol 1e-5" ;;
      sm90w1h) arg="$arg --same-as sm90w1g" ;; esac
    if [ $QUICK -eq 1 ]; then pstep "test_cuda_fwd $arg --quick" 120 build/tests/test_cuda_fwd $arg --quick
    else pstep "test_cuda_fwd $arg" 240 build/tests/test_cuda_fwd $arg; fi
  done
fi
# 3c. the fp32 cases again on the old simple forward kernel (same sweep, same bound: the A/B of
#     correctness of the tiled fp32 kernel, which ran them above)
if [ $TRAIN -eq 0 ] && [ -x build/tests/test_cuda_fwd ]; then
  if [ $QUICK -eq 1 ]; then pstep "test_cuda_fwd --only-f32 --f32-force simple --quick" 120 build/tests/test_cuda_fwd --only-f32 --f32-force simple --quick
  else pstep "test_cuda_fwd --only-f32 --f32-force simple" 180 build/tests/test_cuda_fwd --only-f32 --f32-force simple; fi
fi
pwait

# 4. compute-sanitizer on small shapes: the backward (and dropout) first, then the forward (side by
#    side, pstep, collected by the pwait below)
if [ $SAN -eq 1 ] && [ $TRAIN -eq 0 ] && command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck racecheck initcheck synccheck; do
    lim=90; [ $tool = racecheck ] && lim=150
    for t in test_cuda_bwd test_cuda_fwd; do
      [ -x build/tests/$t ] || continue
      pstep "san-$tool($t)" $lim compute-sanitizer --tool $tool --error-exitcode 9 \
        build/tests/$t --quick --seed 7
    done
  done
  # the round-2 backward kernels at D = 64 (the runs above take the round-3 ones there),
  # the round-3 ones with their first tile loop (tc3; the default is tc3b), with P rounded
  # once for dv (tc3p) and with the saturated column constants on four warps (tc3k), and
  # with the run-sum scatter (tc3s: warp shuffles and a per-warp scratch in the scatter), and
  # tc3b, tc3c (tc3s + tc3k), tc3d (tc3c with the lean P / dS loop) and tc3e (tc3d with the dq
  # kernel's tile body per tile class; the default, tc3f, is tc3e whose dkdv kernel takes the
  # per-class tile bodies too), and tc3g (tc3f whose dq kernel computes D_i: its prologue's
  # shuffles and the D_i stores the dkdv kernel reads), and tc3t (tc3g with the TMA loads:
  # mbarriers, bulk copies into buffers the warps read)
  if [ -x build/tests/test_cuda_bwd ]; then
    for pth in $BWD_PATHS; do
      for tool in memcheck racecheck synccheck; do
        lim=90; [ $tool = racecheck ] && lim=150
        pstep "san-$tool(test_cuda_bwd --path $pth)" $lim compute-sanitizer --tool $tool --error-exitcode 9 \
          build/tests/test_cuda_bwd --path $pth --quick --seed 7
      done
    done
  fi
  # the opt-in wgmma variants: extra barrier / early K-side load (sm90w1ov), the previous
  # default before it without the lean loop (sm90w1), the lean loop without the pipelined band
  # products (sm90w1b), the saturated / plain tile order (sm90w1d: S before the V load, P V
  # before the next K side), the leaner band-tile overheads (sm90w1e: the c2p-scratch barrier
  # after the first p2c group's products) and a band tile's K side during P V (sm90w1f: cp.async
  # of the window table's ring rows while the P V wgmma reads V), the saturated p2c constants
  # in the accumulators (sm90w1c, the previous default); the default runs above cover sm90w1g
  # (cp.async of the (hi, lo) pairs into the wgmma operand block after the V barrier,
  # st.shared of its zeros / ones before the first barrier)
  if [ -x build/tests/test_cuda_fwd ]; then
    for pth in ${GPU_CHECK_SAN_FWD_PATHS:-sm90w1g ws wskg wskgt}; do
      for tool in racecheck synccheck; do
        pstep "san-$tool(test_cuda_fwd --path $pth)" 150 compute-sanitizer --tool $tool --error-exitcode 9 \
          build/tests/test_cuda_fwd --path $pth --quick --seed 7
      done
    done
  fi
fi
pwait

# 2e. the fp32 tiled forward (fwd_f32.cu): registers, SASS (FFMA present, no local memory)
#     (its cases again on the old simple kernel: 3c)
if [ $TRAIN -eq 0 ]; then
  grep -E "Compiling entry|registers|spill" "$LOG" | grep -A2 "dattn_fwd_f32_d" >>"$OUT/resources.txt" 2>/dev/null
  o=build/src/cuda/fwd_f32.o
  n_ffma=$(cuobjdump -sass "$o" 2>/dev/null | grep -c FFMA)
  n_lmem=$(cuobjdump -sass "$o" 2>/dev/null | grep -cE "LDL|STL")
  echo "$o: FFMA $n_ffma LDL/STL $n_lmem" | tee -a "$OUT/sass.txt" >>"$LOG"
  printf '%-28s %-14s\n' "sass(fp32: FFMA, no LDL/STL)" "$([ "$n_ffma" -gt 0 ] && [ "$n_lmem" -eq 0 ] && echo ok || echo FAIL)" >>"$SUMMARY"
  # the TF32 forward (fwd_tf32.cu, fp32_math = TF32): tf32 HMMA present, no local memory;
  # its cases ran in step 3 (tf32_cases of test_cuda_fwd: the default sweep and --quick)
  grep -E "Compiling entry|registers|spill" "$LOG" | grep -A2 "dattn_fwd_tf32_d" >>"$OUT/resources.txt" 2>/dev/null
  o=build/src/cuda/fwd_tf32.o
  n_hmma=$(cuobjdump -sass "$o" 2>/dev/null | grep -c "HMMA.*TF32")
  n_lmem=$(cuobjdump -sass "$o" 2>/dev/null | grep -cE "LDL|STL")
  echo "$o: HMMA(TF32) $n_hmma LDL/STL $n_lmem" | tee -a "$OUT/sass.txt" >>"$LOG"
  printf '%-28s %-14s\n' "sass(tf32: HMMA.TF32, no LDL/STL)" "$([ "$n_hmma" -gt 0 ] && [ "$n_lmem" -eq 0 ] && echo ok || echo FAIL)" >>"$SUMMARY"
fi

# 5a. (correctness before timings) SPEC acceptance rule against transformers' eager path on this GPU (forward)
[ $TRAIN -eq 1 ] || step "parity(transformers,cuda)" 200 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
  python3 bench/gpu_parity.py --json "$OUT/parity.json"
[ $TRAIN -eq 1 ] || grep -E "^[0-9]+ passed, [0-9]+ failed" "$LOG" | tail -1 >>"$SUMMARY"

# 6. benchmarks
if [ $BENCH -eq 1 ] && [ $NOTRAIN -eq 0 ]; then
  step bench 240 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" python3 bench/gpu_bench.py --json "$OUT/bench.json" $([ $QUICK -eq 1 ] && echo --quick)
fi

# 5. pytest on CUDA (the Python layer's suite, when present): forward and, now that the
#    CUDA backward exists, gradients (tests/python/conftest.py asks the library whether the
#    backward runs on the device; where it would not, the gradient part is SKIPPED).
#    It runs in the --train call (the --no-train call's C sweeps and sanitizers fill its
#    budget on a cold machine), so does 5b and 6b.
PYTESTS=tests/python
if [ -d tests/python ] && [ $NOTRAIN -eq 0 ]; then
  step "pytest(cuda)" 300 env DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider $PYTESTS
  grep -E "^[0-9]+ (passed|failed)" "$LOG" | tail -1 >>"$SUMMARY"
fi

# 5b. forward+backward timing against SDPA flash (the first, simple CUDA backward)
if [ -d python/dattn ] && [ $NOTRAIN -eq 0 ] && [ $BENCH -eq 1 ]; then
  step "bwd-bench" 200 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
    PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/gpu_bwd_bench.py --json "$OUT/bwd_bench.json" \
    $([ $QUICK -eq 1 ] && echo --quick)
fi

# 5c. training (issue 5): the encoder training step against transformers (v3-base shape,
#     B=8 L=512 and B=4 L=2048, fp16 autocast; targets in the JSON; also the SDPA floor, a
#     torch.profiler GPU-busy summary per side, and torch.compile'd dattn / transformers at
#     B=8 L=512: the bench keeps itself under --time-budget 160 s, compiles included), then
#     the end-to-end fine-tune (v3-small shape, 300 steps, bf16 autocast, dropout on;
#     transformers vs dattn final loss within 2%, task learned), under ~90 s.
if [ -d python/dattn ] && [ $BENCH -eq 1 ] && [ $NOTRAIN -eq 0 ]; then
  step "train-bench" 200 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
    PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/gpu_train_bench.py --json "$OUT/train_bench.json" \
    $([ $QUICK -eq 1 ] && echo --quick)
  sed -n '/^gpu_train_bench: v3-base/,/^gpu_train_bench: targets/p' "$LOG" | \
    grep -E "time ratio|interleaved|vs SDPA floor|compile:|busy / median|targets (met|NOT)" >>"$SUMMARY"
fi
if [ -d python/dattn ] && [ $NOTRAIN -eq 0 ]; then
  step "finetune-e2e" 150 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
    PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/finetune_e2e.py --device cuda \
    --json "$OUT/finetune_e2e.json"
  grep -E "^finetune_e2e: initial" "$LOG" | tail -1 >>"$SUMMARY"
fi

# 6a. the fused layer node against two nodes (hf.FUSED_LAYER), v3-base B8 L512 training steps
#     interleaved: the host time it saves where the step is host-bound
if [ -d python/dattn ] && [ $BENCH -eq 1 ] && [ $NOTRAIN -eq 0 ]; then
  step "host-step-ab" 90 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
    PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 bench/host_step_ab.py --device cuda \
    --B 8 --L 512 --rounds 30 --json "$OUT/host_step_ab.json"
  grep -E "^fused .* a layer" "$LOG" | tail -1 >>"$SUMMARY"
fi

# 6b. the README main job on the GPU (python -m dattn demo: v3-base-shaped model, dattn vs
#     transformers, parity + speed)
if [ -d python/dattn ] && [ $NOTRAIN -eq 0 ]; then
  step "demo(cuda)" 150 env PYTHONUNBUFFERED=1 DATTN_LIBRARY="$(pwd)/build/libdattn.so" \
    PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 -m dattn demo --device cuda --quiet
fi


t_end=$(date +%s)
python3 - "$OUT" "$t_start" "$t_end" <<'EOF' >>"$LOG" 2>&1
import json, os, sys
out, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = open(os.path.join(out, "env.txt")).read()
steps = open(os.path.join(out, "summary.txt")).read().splitlines()
j = dict(env=env, steps=steps, seconds=t1 - t0)
for name in ("bench", "parity", "bwd_bench", "train_bench", "finetune_e2e", "host_step_ab"):
    b = os.path.join(out, name + ".json")
    if os.path.exists(b):
        j[name] = json.load(open(b))
json.dump(j, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
EOF
echo
sed -n '/^shape /,/^==== bench:/p' "$LOG" | grep -v '^===='
grep -E "^B= *[0-9]+ L=|^     back to back" "$LOG"
echo "==== summary ($((t_end - t_start))s)"
cat "$SUMMARY"
if grep -q "FAIL\|TIMEOUT" "$SUMMARY"; then exit 1; fi
exit 0
