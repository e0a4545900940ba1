#!/bin/sh
# The bench prototypes on a GPU machine in one call (run from the repository root): builds
# them and the library for sm_90a, runs their float64 checks, times them with cudaEvent and
# measures with ncu, in the same call, the library's backward kernels with and without position
# terms and SDPA flash's backward kernels on the op-level shapes, then prints the prototype pair
# against them: without position terms (R 0) and with DeBERTa-v3's (R 512: the log-bucket table
# of S 256 saturating at 512; how the prototype sums its band table gradients: see its
# header), plus cudaEvent runs where every tile is a band tile (R = L).
#
#   sh scripts/gpu_proto.sh [--shapes "32 512,8 2048,2 8192"] [--r "0 512"]
#
# Writes under $OUT/proto (default gpu-out/proto): env.txt, summary.txt, check.log, bench.log,
# dur_proto_R*.csv / dur_lib.csv (ncu kernel durations, ms at ncu's locked clocks), table.txt.
set -u
OUT=${OUT:-gpu-out}
O=$OUT/proto
SHAPES="32 512,8 2048,2 8192"
RS="0 512"
ARGS="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --shapes) SHAPES=$2; shift ;;
    --r) RS=$2; shift ;;
    *) echo "gpu_proto.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$O"
S=$O/summary.txt
: >"$S"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: sh scripts/gpu_proto.sh $ARGS"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo none)}"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  ncu --version 2>&1 | tail -1
} >"$O/env.txt"
export PYTHONUNBUFFERED=1 PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
t0=$(date +%s)
make -j12 CUDA=1 CUDA_ARCHS="$ARCH" NVCCFLAGS="-Xptxas -v" lib tests-build >"$O/build.log" 2>&1
echo "build rc=$? at $(($(date +%s) - t0)) s" >>"$S"
grep -A3 "Compiling entry function 'dattn_proto" "$O/build.log" | grep -E "entry|Used|spill" >"$O/resources.txt"
P=build/bench/proto_ws_bwd
timeout 60 "$P" --check >"$O/check.log" 2>&1
echo "check rc=$? ($(tail -1 "$O/check.log"))" >>"$S"
: >"$O/bench.log"
shapes=$(echo "$SHAPES" | tr ',' '\n')
for r in $RS; do
  echo "$shapes" | while read -r B L; do
    [ -n "$B" ] && timeout 60 "$P" --bench "$B" "$L" 20 "$r" >>"$O/bench.log" 2>&1
  done
done
# every tile a band tile (R = L): the band tile's cost against the plain tile's (R 0 above)
echo "$shapes" | while read -r B L; do
  [ -n "$B" ] && [ "$L" -gt 512 ] && timeout 60 "$P" --bench "$B" "$L" 20 "$L" >>"$O/bench.log" 2>&1
done
echo "bench rc=$? at $(($(date +%s) - t0)) s" >>"$S"
# ncu: two launches of each kernel per shape (the first untimed launch and one timed call)
for r in $RS; do
  cmds=$(echo "$shapes" | while read -r B L; do [ -n "$B" ] && printf '%s --bench %s %s 1 %s; ' "$P" "$B" "$L" "$r"; done)
  timeout 300 ncu -k "regex:dattn_proto_ws" --section SpeedOfLight -f -o "$O/proto_R$r" sh -c "$cmds" >"$O/ncu_proto_R$r.log" 2>&1
  echo "ncu proto R$r rc=$? at $(($(date +%s) - t0)) s" >>"$S"
  ncu --import "$O/proto_R$r.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum >"$O/dur_proto_R$r.csv" 2>&1
done
lshapes=$(echo "$shapes" | while read -r B L; do [ -n "$B" ] && printf '%sx%s,' "$B" "$L"; done)
timeout 300 ncu --profile-from-start off -k "regex:dattn_bwd|flash_bwd" --section SpeedOfLight -f -o "$O/lib" \
  python3 bench/gpu_prof_target.py --shapes "${lshapes%,}" --nopos >"$O/ncu_lib.log" 2>&1
echo "ncu lib rc=$? at $(($(date +%s) - t0)) s" >>"$S"
ncu --import "$O/lib.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum >"$O/dur_lib.csv" 2>&1
rm -f "$O"/*.ncu-rep
python3 - "$O" $RS <<'PY' | tee "$O/table.txt"
import csv, os, sys
o, rs = sys.argv[1], sys.argv[2:]
def rows(f):
    r = list(csv.reader(open(os.path.join(o, f))))
    h = r[0]
    k, d, g = h.index("Kernel Name"), h.index("gpu__time_duration.sum"), h.index("Grid Size")
    return [(x[k], float(x[d]), x[g]) for x in r[2:] if len(x) > max(k, d, g)]
try:
    lib = rows("dur_lib.csv")
    protos = {r: rows(f"dur_proto_R{r}.csv") for r in rs}
except (OSError, ValueError, IndexError) as e:
    sys.exit(f"no durations: {e}")
# gpu_prof_target, per shape: the dattn backward with position terms (dq, dkdv, the table
# reduce), then without (dq, dkdv), then flash's three backward kernels (the main one: dq_dk_dv)
dq = [t for n, t, _ in lib if "dattn_bwd" in n and n.endswith("kv0")]
kv = [t for n, t, _ in lib if "dattn_bwd" in n and n.endswith("kv1")]
pos = [(dq[2 * j], kv[2 * j]) for j in range(min(len(dq), len(kv)) // 2)]
nopos = [(dq[2 * j + 1], kv[2 * j + 1]) for j in range(min(len(dq), len(kv)) // 2)]
flash = [t for n, t, _ in lib if "flash_bwd" in n and "dq_dk_dv" in n]
nan = float("nan")
for r in rs:
    proto = protos[r]
    # per shape: the untimed launch of dq then dkdv, then the timed call of each (kept)
    pairs = [(proto[i + 2][1], proto[i + 3][1]) for i in range(0, len(proto) - 3, 4)]
    lib_r = nopos if r == "0" else pos
    what = "without position terms" if r == "0" else f"with position terms (R {r}: v3's table)"
    print(f"ms at ncu clocks, {what}: prototype dq + dkdv | library dq + dkdv | flash backward kernel")
    for j, (a, b) in enumerate(pairs):
        n = lib_r[j] if j < len(lib_r) else (nan, nan)
        f = flash[j] if j < len(flash) else nan
        print(f"  shape {j}: {a:.3f} + {b:.3f} = {a + b:.3f} | {n[0]:.3f} + {n[1]:.3f} = {n[0] + n[1]:.3f}"
              f" | {f:.3f}   prototype / flash {((a + b) / f):.3f}x, / library {((a + b) / (n[0] + n[1])):.3f}x")
PY
echo "done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
