#!/bin/sh
# Forward A/B of two or more source trees in one GPU call (the method of NOTES.md: ncu kernel
# durations of every side in the same call, alternating, and the outputs / gradients compared bit
# for bit). Run on the GPU machine from the repository root:
#
#   sh scripts/gpu_fwd_ab.sh base=.gpu/base new=.          (DIR "." is the working tree)
#   sh scripts/gpu_fwd_ab.sh a=.gpu/a b=.gpu/b c=.
#   sh scripts/gpu_fwd_ab.sh wskg=.@wskg wskgt=.@wskgt  (one tree, two DATTN_CUDA_FWD pins)
#
# TAG=DIR@PIN runs that side with DATTN_CUDA_FWD=PIN (ncu and gpu_lib_ab both; a tree named twice
# is built once); without @PIN a side takes FAB_PIN for ncu and the library's default for gpu_lib_ab.
# A tree other than "." is made before the call, e.g.
#   mkdir -p .gpu/base && git archive REV Makefile src include | tar -x -C .gpu/base
# (.gpu/ is ignored by git: carry it). Every tree is built for sm_90a, in parallel. Then:
#   - FAB_ROUNDS (default 2) rounds, each side in turn: ncu durations of the kernels matching
#     FAB_KERNELS (default dattn_fwd_ws) in bench/gpu_prof_target.py --no-bwd --no-flash
#     --shapes FAB_SHAPES (default 32x512,8x2048,2x8192) with DATTN_CUDA_FWD=FAB_PIN (default
#     wskg: at L 512 every tile is a band tile; "" for the library's default);
#   - bench/gpu_lib_ab.py run on each side (the library's default paths: its timings and the
#     gradients of its CASES), then compare against the first side;
#   - on ".": test_cuda_fwd --path P --quick for each P of FAB_TESTS (default "ws wsk wsg wskg wsp").
# Writes under $OUT/fab (default gpu-out/fab): summary.txt (every table), ab_<tag>.txt,
# durations.csv, build / test logs; $OUT/fab.tgz holds the folder (the device tool returns 8 files).
set -u
O=${OUT:-gpu-out}/fab
mkdir -p "$O/grads"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
SHAPES=${FAB_SHAPES:-32x512,8x2048,2x8192}
PIN=${FAB_PIN-wskg}
ROUNDS=${FAB_ROUNDS:-2}
KER=${FAB_KERNELS:-dattn_fwd_ws}
TESTS=${FAB_TESTS-ws wsk wsg wskg wsp}
[ $# -ge 2 ] || { echo "gpu_fwd_ab.sh: give two or more TAG=DIR" >&2; exit 2; }
export PYTHONUNBUFFERED=1 PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
S=$O/summary.txt
: >"$S"
t0=$(date +%s)
# the trees to build, each once (the first side naming it gives the log's tag)
builds="" dirs="" n=0
for side in "$@"; do
  tag=${side%%=*} dir=${side#*=} dir=${dir%%@*}
  case " $dirs " in *" $dir "*) continue ;; esac
  dirs="$dirs $dir" builds="$builds $tag=$dir" n=$((n + 1))
done
j=$((16 / n))
[ $j -ge 2 ] || j=2
for b in $builds; do
  tag=${b%%=*} dir=${b#*=}
  extra=""
  [ "$dir" = . ] && [ -n "$TESTS" ] && extra=tests-build
  (make -C "$dir" -j$j CUDA=1 CUDA_ARCHS="$ARCH" NVCCFLAGS="-Xptxas -v" lib $extra >"$O/build_$tag.log" 2>&1
   echo "build $tag ($dir) rc=$?" >>"$S") &
done
wait
echo "builds done at $(($(date +%s) - t0)) s" >>"$S"
lib() { echo "$(cd "$1" && pwd)/build/libdattn.so"; }
: >"$O/durations.csv"
r=1
while [ $r -le "$ROUNDS" ]; do
  for side in "$@"; do
    tag=${side%%=*} dir=${side#*=} pin=$PIN
    case $dir in *@*) pin=${dir#*@} dir=${dir%%@*} ;; esac
    env DATTN_LIBRARY="$(lib "$dir")" DATTN_CUDA_FWD="$pin" ncu --profile-from-start off -k "regex:$KER" \
      --section SpeedOfLight -f -o "$O/d" python3 bench/gpu_prof_target.py --shapes "$SHAPES" --no-bwd --no-flash \
      >"$O/ncu_$tag.log" 2>&1 || echo "ncu $tag round $r failed: $(tail -1 "$O/ncu_$tag.log")" >>"$S"
    ncu --import "$O/d.ncu-rep" --page raw --csv --print-units base --metrics gpu__time_duration.sum 2>/dev/null |
      awk -v t="$tag" -v r="$r" 'NR > 2 { print t "," r "," $0 }' >>"$O/durations.csv"
    rm -f "$O/d.ncu-rep"
  done
  r=$((r + 1))
done
echo "ncu done at $(($(date +%s) - t0)) s" >>"$S"
first=""
for side in "$@"; do
  tag=${side%%=*} dir=${side#*=} pin=""
  case $dir in *@*) pin=${dir#*@} dir=${dir%%@*} ;; esac
  DATTN_LIBRARY="$(lib "$dir")" DATTN_CUDA_FWD="$pin" python3 bench/gpu_lib_ab.py run --tag "$tag" --dir "$O/grads" >>"$O/lib_ab.log" 2>&1 ||
    echo "gpu_lib_ab $tag failed" >>"$S"
  if [ -z "$first" ]; then
    first=$tag
  else
    python3 bench/gpu_lib_ab.py compare --dir "$O/grads" --base "$first" --new "$tag" >"$O/ab_$tag.txt" 2>&1
  fi
done
rm -f "$O"/grads/*_grads.pt
echo "gradients done at $(($(date +%s) - t0)) s" >>"$S"
for p in $TESTS; do
  OMP_NUM_THREADS=4 timeout 200 build/tests/test_cuda_fwd --path "$p" --quick --seed 11 >"$O/t_$p.log" 2>&1
  echo "test_cuda_fwd --path $p --quick: rc $? $(grep -E '^[0-9]+ passed' "$O/t_$p.log" | tail -1)" >>"$S"
done
python3 - "$O/durations.csv" "$SHAPES" "$@" <<'PY' | tee -a "$S"
import collections, csv, sys
path, shapes = sys.argv[1], sys.argv[2].split(",")
sides = [s.split("=")[0] for s in sys.argv[3:]]
runs = collections.defaultdict(list)  # (tag, round) -> [(kernel, us)] in launch order
for row in csv.reader(open(path)):
    if len(row) < 4:
        continue
    try:
        us = float(row[-1].replace(",", "")) / 1000.0
    except ValueError:
        continue
    name = [c for c in row if c.startswith("dattn_")]
    runs[(row[0], row[1])].append((name[0] if name else "?", us))
# gpu_prof_target runs the shapes in order, one forward call each: a side's launches split into
# len(shapes) equal groups (a call may launch more than one kernel, e.g. a prologue)
cell = {}  # (tag, shape index) -> (min total over rounds, [(kernel, min us)])
for t in sides:
    rounds = [v for (tt, _), v in sorted(runs.items()) if tt == t]
    if not rounds or any(len(v) != len(rounds[0]) or len(v) % len(shapes) for v in rounds):
        print("%s: launch counts %s do not split into %d shapes" % (t, [len(v) for v in rounds], len(shapes)))
        continue
    k = len(rounds[0]) // len(shapes)
    for i in range(len(shapes)):
        groups = [v[i * k:(i + 1) * k] for v in rounds]
        tot = min(sum(us for _, us in g) for g in groups)
        per = [(groups[0][j][0], min(g[j][1] for g in groups)) for j in range(k)]
        cell[(t, i)] = (tot, per)
print("ncu kernel durations per call (us at ncu's clocks, min over rounds; ratio to %s):" % sides[0])
for i, sh in enumerate(shapes):
    base = cell.get((sides[0], i), (float("nan"), []))[0]
    for t in sides:
        if (t, i) not in cell:
            continue
        tot, per = cell[(t, i)]
        print("  %-8s %-8s total %9.2f (%.4f)  %s" % (sh, t, tot, tot / base,
              "  ".join("%s %.2f" % (n[6:40], us) for n, us in per)))
PY
for side in "$@"; do
  tag=${side%%=*}
  [ -f "$O/ab_$tag.txt" ] && { echo "--- gpu_lib_ab compare $first -> $tag"; cat "$O/ab_$tag.txt"; } >>"$S"
done
echo "done at $(($(date +%s) - t0)) s" >>"$S"
cat "$S"
tar -czf "$O/../fab.tgz" -C "$O/.." fab
