#!/usr/bin/env bash
# The dimension sweep on one GPU (benchmarks/gpu/README.md, "The dimension sweep"): store the part this call carried,
# unpack the payload (setup.sh), run dimension.py. Results (summary.md, result.json, tables, figure, dimension.json,
# parts/) go to $OUT.
#
#   benchmarks/gpu/dimension.sh [dimension.py options]      e.g. --budget-seconds 480 --fo-modes bias,lora,all
#
# Variables: those of setup.sh, and DPNC_GPU_TIMEOUT (560: seconds before dimension.py is killed; the parts that
# finished are in $OUT/parts by then).
set -uo pipefail
source "$(dirname "$0")/setup.sh"
echo "dimension.sh: setup took $(( $(date +%s) - start )) s; PYTHONPATH=$PYTHONPATH"
command -v nvidia-smi >/dev/null && nvidia-smi -L
timeout -k 5 "${DPNC_GPU_TIMEOUT:-560}" "$PY" benchmarks/gpu/dimension.py --out "$RESULTS" --data-dir "$PAY/data" \
    "$@" 2>&1 | tee "$RESULTS/dimension.log"
rc=${PIPESTATUS[0]}
echo "dimension.sh: dimension.py exited $rc after $(( $(date +%s) - start )) s in all"
exit "$rc"
