#!/bin/sh
# The bench prototypes on a GPU machine in one call (run from the repository root): builds
# them and the library for sm_90a, runs their float64 checks, times them with cudaEvent and
# measures with ncu, in the same call, the library's backward kernels without position terms
# and SDPA flash's backward kernels on the op-level shapes, then prints the prototype pair
# against both.
#
#   sh scripts/gpu_proto.sh [--shapes "32 512,8 2048,2 8192"]
#
# Writes under $OUT/proto (default gpu-out/proto): summary.txt, check.log, bench.log,
# dur_proto.csv / dur_lib.csv (ncu kernel durations, ms at ncu's locked clocks), table.txt.
set -u
OUT=${OUT:-gpu-out}
O=$OUT/proto
SHAPES="32 512,8 2048,2 8192"
while [ $# -gt 0 ]; do
  case $1 in
    --shapes) SHAPES=$2; shift ;;
    *) echo "gpu_proto.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$O"
S=$O/summary.txt
: >"$S"
export PYTHONUNBUFFERED=1 PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
t0=$(date +%s)
make -j12 CUDA=1 CUDA_ARCHS="$ARCH" NVCCFLAGS="-Xptxas -v" lib tests-build >"$O/build.log" 2>&1
echo "build rc=$? at $(($(date +%s) - t0)) s" >>"$S"
grep -A2 "Compiling entry function 'dattn_proto" "$O/build.log" | grep -E "entry|Used|spill" >"$O/resources.txt"
P=build/bench/proto_ws_bwd
timeout 60 "$P" --check >"$O/check.log" 2>&1
echo "check rc=$? ($(tail -1 "$O/check.log"))" >>"$S"
: >"$O/bench.log"
shapes=$(echo "$SHAPES" | tr ',' '\n')
echo "$shapes" | while read -r B L; do
  [ -n "$B" ] && timeout 60 "$P" --bench "$B" "$L" 20 >>"$O/bench.log" 2>&1
done
echo "bench rc=$? at $(($(date +%s) - t0)) s" >>"$S"
# ncu: two launches of each kernel per shape (the first untimed launch and one timed call)
cmds=$(echo "$shapes" | while read -r B L; do [ -n "$B" ] && printf '%s --bench %s %s 1; ' "$P" "$B" "$L"; done)
timeout 300 ncu -k "regex:dattn_proto_ws" --section SpeedOfLight -f -o "$O/proto" sh -c "$cmds" >"$O/ncu_proto.log" 2>&1
echo "ncu proto rc=$? at $(($(date +%s) - t0)) s" >>"$S"
ncu --import "$O/proto.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum >"$O/dur_proto.csv" 2>&1
lshapes=$(echo "$shapes" | while read -r B L; do [ -n "$B" ] && printf '%sx%s,' "$B" "$L"; done)
timeout 300 ncu --profile-from-start off -k "regex:dattn_bwd|flash_bwd" --section SpeedOfLight -f -o "$O/lib" \
  python3 bench/gpu_prof_target.py --shapes "${lshapes%,}" --nopos >"$O/ncu_lib.log" 2>&1
echo "ncu lib rc=$? at $(($(date +%s) - t0)) s" >>"$S"
ncu --import "$O/lib.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum >"$O/dur_lib.csv" 2>&1
rm -f "$O"/*.ncu-rep
python3 - "$O" <<'PY' | tee "$O/table.txt"
import csv, os, sys
o = sys.argv[1]
def rows(f):
    r = list(csv.reader(open(os.path.join(o, f))))
    h = r[0]
    k, d, g = h.index("Kernel Name"), h.index("gpu__time_duration.sum"), h.index("Grid Size")
    return [(x[k], float(x[d]), x[g]) for x in r[2:] if len(x) > max(k, d, g)]
try:
    proto, lib = rows("dur_proto.csv"), rows("dur_lib.csv")
except (OSError, ValueError, IndexError) as e:
    sys.exit(f"no durations: {e}")
# the prototype, per shape: its untimed launch of dq then dkdv, then the timed call of each
# (the second pair is kept)
pairs = [(proto[i + 2][1], proto[i + 3][1]) for i in range(0, len(proto) - 3, 4)]
# gpu_prof_target, per shape: the dattn backward with position terms (dq, dkdv, the table
# reduce), then without (dq, dkdv), then flash's three backward kernels (the main one: dq_dk_dv)
dq = [t for n, t, _ in lib if "dattn_bwd" in n and n.endswith("kv0")]
kv = [t for n, t, _ in lib if "dattn_bwd" in n and n.endswith("kv1")]
nopos = [(dq[2 * j + 1], kv[2 * j + 1]) for j in range(min(len(dq), len(kv)) // 2)]
flash = [t for n, t, _ in lib if "flash_bwd" in n and "dq_dk_dv" in n]
print("ms at ncu clocks: prototype dq + dkdv | library nopos dq + dkdv | flash backward kernel")
for j, (a, b) in enumerate(pairs):
    n = nopos[j] if j < len(nopos) else (float("nan"), float("nan"))
    f = flash[j] if j < len(flash) else float("nan")
    print(f"  shape {j}: {a:.3f} + {b:.3f} = {a + b:.3f} | {n[0]:.3f} + {n[1]:.3f} = {n[0] + n[1]:.3f}"
          f" | {f:.3f}   prototype / flash {((a + b) / f):.3f}x, / library nopos {((a + b) / (n[0] + n[1])):.3f}x")
PY
echo "done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
