#!/bin/sh
# Builds the host emulation of the CUDA backend and the CUDA test programs against it
# (README.md). Usage: sh tests/emu/build.sh [OUTDIR] [extra compiler flags, e.g. -fsanitize=address]
# Produces OUTDIR/test_cuda_fwd and OUTDIR/test_cuda_bwd (default OUTDIR: build-emu), and
# OUTDIR/proto_* of bench/proto_*.cu. EMU_PROTOS_ONLY=1 builds the prototypes alone (seconds,
# not minutes: scripts/check.sh runs their --check that way).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-emu}
shift 2>/dev/null || true
XF="$*"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/src" "$OUT/obj"
mkdir -p "$OUT/src/cuda" "$OUT/src/cpu" "$OUT/obj"
cp "$ROOT"/src/*.h "$ROOT"/src/*.c "$OUT/src/"
cp "$ROOT"/src/cpu/* "$OUT/src/cpu/"
for f in "$ROOT"/src/cuda/*; do
  python3 "$ROOT/tests/emu/transform.py" "$f" >"$OUT/src/cuda/$(basename "$f")"
done
cp "$ROOT/tests/emu/ptx.cuh" "$OUT/src/cuda/ptx.cuh"
cp "$ROOT/tests/emu/tma.cuh" "$OUT/src/cuda/tma.cuh"
# sm90.cuh: the real descriptor part, the emulated instructions (sm90_ops.h)
sed '/^\/\* ---- the instructions/,$d' "$ROOT/src/cuda/sm90.cuh" >"$OUT/src/cuda/sm90.cuh"
cat "$ROOT/tests/emu/sm90_ops.h" >>"$OUT/src/cuda/sm90.cuh"
CF="-std=c11 -O2 -g -fopenmp -D_GNU_SOURCE -DDATTN_WITH_CUDA -I$ROOT/include -I$ROOT/tests/emu -Wall -Wno-unknown-pragmas $XF"
XXF="-std=c++17 -O2 -g -DDATTN_WITH_CUDA -I$ROOT/include -I$ROOT/tests/emu -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-psabi $XF"
protos() { # the kernel prototypes of bench/ (bench/proto_*.cu) against the emulated headers
  for f in "$ROOT"/bench/proto_*.cu; do
    [ -f "$f" ] || continue
    p=$(basename "$f" .cu)
    python3 "$ROOT/tests/emu/transform.py" "$f" >"$OUT/src/$p.cu"
    g++ $XXF -I"$OUT/src/cuda" -I"$ROOT/tests" -x c++ -c "$OUT/src/$p.cu" -o "$OUT/obj/$p.o"
    g++ -o "$OUT/$p" "$OUT/obj/$p.o" "$OUT/obj/emu.o" -fopenmp -lm $XF
  done
}
if [ "${EMU_PROTOS_ONLY:-0}" = 1 ]; then
  g++ $XXF -c "$ROOT/tests/emu/emu.cpp" -o "$OUT/obj/emu.o"
  protos
  echo "built $(cd "$OUT" && ls proto_* 2>/dev/null | tr '\n' ' ')"
  exit 0
fi
objs=""
for f in "$OUT"/src/*.c "$OUT"/src/cpu/*.c; do
  o="$OUT/obj/$(basename "$f" .c).o"
  isa=""
  case $f in
    *_avx512.c) isa="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c" ;;
    *_avx2.c) isa="-mavx2 -mfma -mf16c" ;;
    */buckets.c) isa="-ffp-contract=off" ;;
  esac
  cc $CF $isa -c "$f" -o "$o" &
  objs="$objs $o"
done
wait
for f in "$OUT"/src/cuda/*.cu; do
  o="$OUT/obj/cu_$(basename "$f" .cu).o"
  g++ $XXF -x c++ -c "$f" -o "$o" &
  objs="$objs $o"
done
g++ $XXF -c "$ROOT/tests/emu/emu.cpp" -o "$OUT/obj/emu.o"
wait
objs="$objs $OUT/obj/emu.o"
sup=""
for f in "$ROOT"/tests/*.c; do
  case $(basename "$f") in test_*) continue ;; esac
  o="$OUT/obj/t_$(basename "$f" .c).o"
  cc $CF -I"$ROOT/src" -I"$ROOT/tests" -c "$f" -o "$o"
  sup="$sup $o"
done
for t in test_cuda_fwd test_cuda_bwd; do
  [ -f "$ROOT/tests/$t.c" ] || continue
  cc $CF -I"$ROOT/src" -I"$ROOT/tests" -c "$ROOT/tests/$t.c" -o "$OUT/obj/$t.o"
  g++ -o "$OUT/$t" "$OUT/obj/$t.o" $sup $objs -fopenmp -lm $XF
done
protos
echo "built $OUT/test_cuda_fwd $OUT/test_cuda_bwd $(cd "$OUT" && ls proto_* 2>/dev/null | tr '\n' ' ')"
