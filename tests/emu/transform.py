"""Rewrites a CUDA source of src/cuda for the host emulation (build.sh): kernel launches
k<<<g, b, s, st>>>(args) -> emu_launch(k, g, b, s, st, args) and dynamic shared memory
declarations -> a pointer to the emulated block's buffer."""
import re
import sys

s = open(sys.argv[1]).read()
s = re.sub(r"([\w#]+)\s*<<<(.*?)>>>\s*\(", r"emu_launch(\1, \2, ", s, flags=re.S)
s = re.sub(r"extern\s+__shared__\s+__align__\(\d+\)\s+(\w+)\s+(\w+)\[\];",
           r"\1 *\2 = (\1 *)emu_dyn_smem();", s)
if "<<<" in s or re.search(r"extern\s+__shared__", s):
    sys.exit("transform.py: unhandled construct in " + sys.argv[1])
sys.stdout.write(s)
