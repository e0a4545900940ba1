#!/bin/sh
# call 49 (x1): scripts/gpu_kernel_ab.sh's first run: --paths tc3g,tc3t on the working tree
set -u
OUT=$OUT/res sh scripts/gpu_kernel_ab.sh --paths tc3g,tc3t
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
