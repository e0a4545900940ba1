#!/bin/sh
# Kernel A/B in one GPU call (NOTES.md: time kernel changes with ncu durations of both sides in
# the same call, not wall clock; compare the gradients bit for bit), the steps the A/B calls of
# bench/results/gpu-2026-11-30-flush2 .. gpu-2026-12-01-stage2 wrote out each time (for the
# forward's compile-time variants see scripts/gpu_ab.sh). Run on the GPU machine from the
# repository root:
#
#   sh scripts/gpu_kernel_ab.sh --base DIR           the working tree against the tree at DIR
#   sh scripts/gpu_kernel_ab.sh --base DIR --tree T1=DIR1 --tree T2=DIR2 ...
#                                                    a chain: base, T1, T2, ..., the working tree
#   sh scripts/gpu_kernel_ab.sh --paths tc3g,tc3t    two DATTN_CUDA_BWD paths of the working tree
#
# DIR holds a source tree made before the call, e.g.
#   mkdir -p .gpu/base && git archive REV Makefile src include | tar -x -C .gpu/base
# (.gpu/ is ignored by git: carry it). The trees are built for sm_90a in parallel. For each side
# (base, the --tree sides in order, new; or each path) ncu measures the kernels matching
# --kernels (default "dattn_bwd") in bench/gpu_prof_target.py --no-flash --shapes SHAPES (default
# 32x512,8x2048,2x8192), and bench/gpu_lib_ab.py saves its gradients. A chain of stacked changes
# is measured in one call that way, each step against the one before it. Writes under $OUT/ab
# (default gpu-out/ab): summary.txt (steps), dur_<side>.csv (ncu), ratios.txt (per kernel and
# shape, the duration and the DRAM bytes read + written, each side against the one before it,
# and with --tree the last against the first),
# ab.txt / ab.json (timings and the bitwise gradient comparison, last side against the first)
# and with --tree ab_<a>_<b>.txt / .json for each step.
# Other options: --shapes BxL,..., --kernels REGEX, --dry-run (print the steps, run nothing),
# --pack (at the end, ab/ goes whole into $OUT/ab.tgz and keeps ratios.txt, ab.txt and
# summary.txt: the device tool brings back at most 8 files a call; scripts/pack_out.sh).
set -u
OUT=${OUT:-gpu-out}
O=$OUT/ab
BASE="" PATHS="" TREES="" SHAPES=32x512,8x2048,2x8192 KERNELS=dattn_bwd DRY=0 PACK=0
KEEP="ratios.txt ab.txt summary.txt" # (--pack: the files ab/ keeps beside ab.tgz)
while [ $# -gt 0 ]; do
  case $1 in
    --base) BASE=$2; shift ;;
    --paths) PATHS=$2; shift ;;
    --tree) TREES="$TREES $2"; shift ;;
    --shapes) SHAPES=$2; shift ;;
    --kernels) KERNELS=$2; shift ;;
    --dry-run) DRY=1 ;;
    --pack) PACK=1 ;;
    *) echo "gpu_kernel_ab.sh: unknown argument $1 (see the header)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$BASE" ] && [ -n "$PATHS" ] || [ -z "$BASE$PATHS" ]; then
  echo "gpu_kernel_ab.sh: give either --base DIR or --paths P1,P2" >&2
  exit 2
fi
if [ -n "$BASE" ] && [ ! -f "$BASE/Makefile" ]; then
  echo "gpu_kernel_ab.sh: --base $BASE holds no source tree (Makefile missing)" >&2
  exit 2
fi
if [ -n "$TREES" ] && [ -z "$BASE" ]; then
  echo "gpu_kernel_ab.sh: --tree goes with --base" >&2
  exit 2
fi
seen=""
for t in $TREES; do
  tt=${t%%=*} td=${t#*=}
  case $tt in
    ''|base|new|*[!A-Za-z0-9_]*) echo "gpu_kernel_ab.sh: --tree $t: the tag must be letters, digits or _, not base or new" >&2; exit 2 ;;
  esac
  if [ "$td" = "$t" ] || [ ! -f "$td/Makefile" ]; then
    echo "gpu_kernel_ab.sh: --tree $t: give TAG=DIR, DIR a source tree (Makefile missing)" >&2
    exit 2
  fi
  case " $seen " in
    *" $tt "*) echo "gpu_kernel_ab.sh: --tree $t: the tag $tt is given twice (each side's files are named by it)" >&2; exit 2 ;;
  esac
  seen="$seen $tt"
done
# sides: "tag library DATTN_CUDA_BWD" (an empty path: the library's default); the trees to build
# before the working tree: the base, then the --tree ones
CHAIN=0
[ -n "$TREES" ] && CHAIN=1
[ -n "$BASE" ] && TREES="base=$BASE$TREES"
if [ -n "$BASE" ]; then
  SIDES=""
  for t in $TREES; do SIDES="$SIDES ${t%%=*}:${t#*=}/build/libdattn.so:"; done
  SIDES="$SIDES new:build/libdattn.so:"
else
  p1=${PATHS%%,*} p2=${PATHS#*,}
  if [ -z "$p1" ] || [ -z "$p2" ] || [ "$p1" = "$PATHS" ]; then
    echo "gpu_kernel_ab.sh: --paths takes two comma-separated DATTN_CUDA_BWD names" >&2
    exit 2
  fi
  SIDES="$p1:build/libdattn.so:$p1 $p2:build/libdattn.so:$p2"
fi
exec 3>&1 # (the dry run prints each step here, past the steps' own redirections)
run() {
  if [ $DRY -eq 1 ]; then echo "+ $*" >&3; else "$@"; fi
}
mkdir -p "$O/grads"
S=$O/summary.txt L=$O/log.txt
: >"$S"
: >"$L"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
export PYTHONUNBUFFERED=1 PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
t0=$(date +%s)
for t in $TREES; do
  (run make -C "${t#*=}" -j4 CUDA=1 CUDA_ARCHS="$ARCH" lib >"$O/build_${t%%=*}.log" 2>&1; echo "build ${t%%=*} rc=$?" >>"$S") &
done
run make -j12 CUDA=1 CUDA_ARCHS="$ARCH" NVCCFLAGS="-Xptxas -v" lib >"$O/build_new.log" 2>&1
echo "build new rc=$?" >>"$S"
wait
grep -E "Compiling entry|registers|spill" "$O/build_new.log" | grep -A1 "Compiling entry" >"$O/resources_new.txt" 2>/dev/null
first="" second="" tags=""
for side in $SIDES; do
  tag=${side%%:*} rest=${side#*:}
  lib=${rest%%:*} pth=${rest#*:}
  [ -z "$first" ] && first=$tag || second=$tag
  tags="$tags $tag"
  run env DATTN_LIBRARY="$lib" DATTN_CUDA_BWD="$pth" ncu --profile-from-start off -k "regex:$KERNELS" \
    --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum \
    -f -o "$O/dur_$tag" python3 bench/gpu_prof_target.py --shapes "$SHAPES" --no-flash \
    >"$O/ncu_$tag.log" 2>&1
  echo "ncu $tag rc=$? at $(($(date +%s) - t0)) s" >>"$S"
  run ncu --import "$O/dur_$tag.ncu-rep" --page raw --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum >"$O/dur_$tag.csv" 2>&1
  rm -f "$O/dur_$tag.ncu-rep"
  run env DATTN_LIBRARY="$lib" DATTN_CUDA_BWD="$pth" python3 bench/gpu_lib_ab.py run --tag "$tag" --dir "$O/grads" >>"$L" 2>&1
  echo "gradients $tag rc=$? at $(($(date +%s) - t0)) s" >>"$S"
done
run python3 bench/gpu_lib_ab.py compare --dir "$O/grads" --base "$first" --new "$second" --json "$O/ab.json" >"$O/ab.txt" 2>&1
# (a chain: each step against the one before it)
pairs="$first:$second"
if [ $CHAIN -eq 1 ]; then
  pairs="" prev=""
  for tag in $tags; do
    if [ -n "$prev" ]; then
      pairs="$pairs $prev:$tag"
      run python3 bench/gpu_lib_ab.py compare --dir "$O/grads" --base "$prev" --new "$tag" \
        --json "$O/ab_${prev}_$tag.json" >"$O/ab_${prev}_$tag.txt" 2>&1
    fi
    prev=$tag
  done
  pairs="$pairs $first:$second"
fi
rm -f "$O"/grads/*_grads.pt
if [ $DRY -eq 1 ]; then
  [ $PACK -eq 1 ] && echo "+ sh scripts/pack_out.sh $O $KEEP" >&3
  exit 0
fi
: >"$O/ratios.txt"
for pr in $pairs; do
python3 - "$O" "${pr%%:*}" "${pr#*:}" "$SHAPES" <<'PY' | tee -a "$O/ratios.txt"
import csv, os, sys
o, a, b, shapes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
MB = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "Tbyte": 1e6}
def durations(tag):
    """(kernel, ms, DRAM MB read + written or None) per launch; row 1 of the csv holds the units"""
    rows = list(csv.reader(open(os.path.join(o, f"dur_{tag}.csv"))))
    h, u = rows[0], rows[1]
    k, d = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
    cols = [h.index(m) for m in ("dram__bytes_read.sum", "dram__bytes_write.sum") if m in h]
    def mb(r):
        if not cols or any(u[c] not in MB for c in cols):
            return None
        return sum(float(r[c].replace(",", "")) * MB[u[c]] for c in cols)
    return [(r[k], float(r[d]), mb(r)) for r in rows[2:] if r and len(r) > d]
try:
    da, db = durations(a), durations(b)
except (OSError, ValueError, IndexError) as e:
    sys.exit(f"no durations: {e}")
# bench/gpu_prof_target.py runs the shapes in order, one call each: each side's launches split
# into len(shapes) equal groups (one side may launch a prologue kernel the other has not); within
# a shape the kernels pair by name, and the call's total compares the two sides
print(f"ncu kernel durations (ms at ncu's clocks), {b} / {a}, per shape in the order bench/gpu_prof_target.py ran them;")
print("then DRAM MB read + written, a -> b (ncu's dram__bytes_read / _write):")
def dram(x, y):
    return f"  {x:9.1f} -> {y:9.1f} MB" if x is not None and y is not None else ""
def total_mb(g):
    return None if any(x[2] is None for x in g) else sum(x[2] for x in g)
if len(da) % len(shapes) or len(db) % len(shapes):
    sys.exit(f"launch counts {len(da)} / {len(db)} do not split into {len(shapes)} shapes")
na, nb = len(da) // len(shapes), len(db) // len(shapes)
for i, sh in enumerate(shapes):
    ga, gb = da[i * na:(i + 1) * na], db[i * nb:(i + 1) * nb]
    rest = list(gb)
    for ka, ta, ma in ga:
        m = next((x for x in rest if x[0] == ka), None)
        if m:
            rest.remove(m)
            print(f"  {sh:8s} {ka[:40]:40s} {ta:10.4f} {m[1]:10.4f}  {m[1] / ta:.4f}x{dram(ma, m[2])}")
        else:
            print(f"  {sh:8s} {ka[:40]:40s} {ta:10.4f} {'-':>10s}  (only {a})")
    for kb, tb, _ in rest:
        print(f"  {sh:8s} {kb[:40]:40s} {'-':>10s} {tb:10.4f}  (only {b})")
    sa, sb = sum(x[1] for x in ga), sum(x[1] for x in gb)
    print(f"  {sh:8s} {'all kernels of the call':40s} {sa:10.4f} {sb:10.4f}  {sb / sa:.4f}x{dram(total_mb(ga), total_mb(gb))}")
PY
done
echo "done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
tail -9 "$O/ab.txt"
[ $PACK -eq 1 ] && sh "$(dirname "$0")/pack_out.sh" "$O" $KEEP
exit 0
