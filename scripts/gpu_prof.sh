#!/bin/sh
# Profile of the CUDA kernels on a GPU machine (Nsight Compute): builds the library (it is
# compiled with -lineinfo), then runs bench/gpu_prof_target.py under ncu and writes under
# $OUT: details.txt (every section, text), summary.txt (one line per kernel: time, issue
# rate, occupancy, top stall), source.csv (per-SASS-line stall samples of the dattn
# kernels and of SDPA flash's forward / backward kernels, from the SourceCounters section) and prof.ncu-rep (open in the Nsight Compute
# GUI, source view with the CUDA lines). Clocks are locked by ncu (base clock): compare
# ratios, not times.
#
#   sh scripts/gpu_prof.sh [args for gpu_prof_target.py, e.g. --shapes 32x512 --no-bwd]
#   DATTN_CUDA_FWD / DATTN_CUDA_BWD pick the paths as in the library; KERNELS (default
#   "dattn_fwd|dattn_bwd|flash") is the ncu kernel-name regex.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
JOBS=${JOBS:-16}
ARCHS=${CUDA_ARCHS:--gencode=arch=compute_90a,code=sm_90a}
make -j"$JOBS" CUDA=1 CUDA_ARCHS="$ARCHS" lib >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
export PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}" DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: sh scripts/gpu_prof.sh $*  (DATTN_CUDA_FWD=${DATTN_CUDA_FWD:-} DATTN_CUDA_BWD=${DATTN_CUDA_BWD:-})"
  echo "git: ${DATTN_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo none)}"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  ncu --version 2>&1 | tail -1
} >"$OUT/env.txt"
ncu --profile-from-start off -k "regex:${KERNELS:-dattn_fwd|dattn_bwd|flash}" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  --section SourceCounters --import-source yes -f -o "$OUT/prof" \
  python3 bench/gpu_prof_target.py "$@" >"$OUT/ncu.log" 2>&1 || { tail -20 "$OUT/ncu.log"; exit 1; }
ncu --import "$OUT/prof.ncu-rep" --print-details all >"$OUT/details.txt" 2>&1
ncu --import "$OUT/prof.ncu-rep" --page source --csv --print-source sass -k "regex:dattn_|flash_bwd|flash_fwd" \
  >"$OUT/source.csv" 2>&1 || echo "(no source page: $(tail -1 "$OUT/source.csv"))"
python3 - "$OUT/details.txt" <<'PY' | tee "$OUT/summary.txt"
import re, sys
txt = open(sys.argv[1]).read()
blocks = re.split(r"\n  (?=\S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\))", txt)
keys = ["Duration", "Issue Slots Busy", "Warp Cycles Per Issued Instruction", "Registers Per Thread",
        "Theoretical Active Warps per SM", "Achieved Active Warps Per SM", "Eligible Warps Per Scheduler",
        "L1/TEX Cache Throughput", "DRAM Throughput"]
for b in blocks[1:]:
    head = b.split("\n")[0]
    name = head.split("(")[0].strip().split("<")[0].replace("void ", "")
    cells = [name[:40]]
    for k in keys:
        m = re.search(r"\n\s+" + re.escape(k) + r"\s+(\S+)\s+([\d,\.]+)", b)
        if m:
            cells.append(f"{k.split(' per')[0].split(' Per')[0]}={m.group(2)}{'' if m.group(1) in ('%', 'cycle', 'warp') else ' ' + m.group(1)}")
    st = re.search(r"each warp of this workload spends ([\d\.]+) cycles being stalled ([^.]+)\.", " ".join(b.split()))
    if st:
        cells.append(f"top stall: {st.group(2)} ({st.group(1)} cycles)")
    print(" | ".join(cells))
PY
