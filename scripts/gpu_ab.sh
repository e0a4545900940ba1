#!/bin/sh
# A/B of CUDA forward variants on one GPU in one run: builds the library once per variant
# (compile-time switches of src/cuda/fwd_sm80.cuh, separate build dirs, built in parallel),
# checks the default variant against the float64 reference (test_cuda_fwd, full sweep),
# then runs the op-level benchmark (bench/gpu_bench.py --op-only) on each library and
# prints one side-by-side table.
#
#   sh scripts/gpu_ab.sh                     # variants below, output in $OUT (gpu-out/ab)
#   VARIANTS="base new" sh scripts/gpu_ab.sh
#   BASE_TREE=/path/to/main-copy sh scripts/gpu_ab.sh   # also build + bench that tree ("tree")
#
# Variants (name:C2P_SHFL:P2C_SWZ):
#   base  0:0  the band path of main (v1: smem c2p scratch, unswizzled p2c tile)
#   shfl  1:0  c2p through quad shuffles only
#   swz   0:1  swizzled p2c tile only
#   new   1:1  both (the branch's default build)
set -u
OUT=${OUT:-gpu-out/ab}
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
VARIANTS=${VARIANTS:-base shfl swz new}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
flags() {
  case $1 in
    base) echo "-DDATTN_FWD_C2P_SHFL=0 -DDATTN_FWD_P2C_SWZ=0" ;;
    shfl) echo "-DDATTN_FWD_C2P_SHFL=1 -DDATTN_FWD_P2C_SWZ=0" ;;
    swz) echo "-DDATTN_FWD_C2P_SHFL=0 -DDATTN_FWD_P2C_SWZ=1" ;;
    new) echo "-DDATTN_FWD_C2P_SHFL=1 -DDATTN_FWD_P2C_SWZ=1" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}
t0=$(date +%s)
pids=""
for v in $VARIANTS; do
  extra=""
  [ "$v" = new ] && extra=tests-build
  ( make -j"$JOBS" CUDA=1 BUILD=build-ab/$v CUDA_ARCHS="$ARCHS" \
      NVCCFLAGS="-Xptxas -v $(flags "$v")" lib $extra >"$OUT/build_$v.log" 2>&1
    echo $? >"$OUT/build_$v.rc" ) &
  pids="$pids $!"
done
if [ -n "${BASE_TREE:-}" ]; then
  ( cd "$BASE_TREE" && make -j"$JOBS" CUDA=1 BUILD=build-ab-tree CUDA_ARCHS="$ARCHS" \
      NVCCFLAGS="-Xptxas -v" lib >"$OUT/build_tree.log" 2>&1
    echo $? >"$OUT/build_tree.rc" ) &
  pids="$pids $!"
fi
for p in $pids; do wait "$p"; done
echo "builds done in $(($(date +%s) - t0))s"
libs=""
for v in $VARIANTS; do
  rc=$(cat "$OUT/build_$v.rc")
  echo "build $v: rc $rc"
  grep -A2 "Compiling entry function 'dattn_fwd_sm80_d64_f16_w4s2n64'" "$OUT/build_$v.log" | grep -E "registers|spill"
  [ "$rc" = 0 ] && libs="$libs $v=build-ab/$v/libdattn.so"
  [ "$rc" = 0 ] || tail -20 "$OUT/build_$v.log"
done
if [ -n "${BASE_TREE:-}" ]; then
  echo "build tree ($BASE_TREE): rc $(cat "$OUT/build_tree.rc")"
  [ "$(cat "$OUT/build_tree.rc")" = 0 ] && libs="$libs tree=$BASE_TREE/build-ab-tree/libdattn.so"
fi
# correctness of the default variant: full sweep against the float64 reference
if [ -x build-ab/new/tests/test_cuda_fwd ]; then
  timeout -k 10 300 build-ab/new/tests/test_cuda_fwd >"$OUT/test_cuda_fwd_new.log" 2>&1
  echo "test_cuda_fwd (new): rc $? -- $(tail -1 "$OUT/test_cuda_fwd_new.log")"
  grep FAIL "$OUT/test_cuda_fwd_new.log" | head -5
fi
for kv in $libs; do
  v=${kv%%=*}
  DATTN_LIB=${kv#*=} DATTN_LIBRARY=${kv#*=} PYTHONUNBUFFERED=1 timeout -k 10 200 python3 bench/gpu_bench.py --op-only --json "$OUT/bench_$v.json" \
    >"$OUT/bench_$v.log" 2>&1
  echo "bench $v: rc $?"
done
python3 - "$OUT" $libs <<'EOF'
import json, os, sys
out = sys.argv[1]
names = [kv.split("=", 1)[0] for kv in sys.argv[2:]]
res = {}
for n in names:
    p = os.path.join(out, "bench_%s.json" % n)
    if os.path.exists(p):
        res[n] = {(r["B"], r["L"]): r for r in json.load(open(p))["op"]}
names = [n for n in names if n in res]
if not names:
    sys.exit("no benchmark results")
shapes = list(res[names[0]].keys())
f = lambda x: "%8.3f" % x if x else "%8s" % "-"
for key, title in (("dattn_ms", "dattn (c2p|p2c, v3 log buckets)"), ("dattn_satmost_ms", "diag:sat (pb 4, M 8)"),
                   ("dattn_allband_ms", "diag:allband (linear, S = L)"), ("dattn_nopos_ms", "nopos"),
                   ("dattn_masked_half_ms", "masked half")):
    print("\n%s, ms" % title)
    print("%-12s" % "shape" + "".join("%9s" % n for n in names) + "%9s" % "flash" + "".join("%9s" % ("x " + n) for n in names))
    for s in shapes:
        fl = res[names[0]][s].get("sdpa_flash_ms")
        row = "%-12s" % ("B%d L%d" % s) + "".join(" " + f(res[n][s].get(key)) for n in names) + " " + f(fl)
        row += "".join(" %8.2f" % (res[n][s][key] / fl) if res[n][s].get(key) and fl else " %8s" % "-" for n in names)
        print(row)
EOF
echo "total $(($(date +%s) - t0))s"
