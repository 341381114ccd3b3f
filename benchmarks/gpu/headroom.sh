#!/usr/bin/env bash
# On one GPU (benchmarks/gpu/README.md, "Where the model has room to learn"): store the part this call carried,
# unpack the payload (setup.sh), run headroom.py: Table 3 on a random 1.1B decoder, then DPZero's Table 2 claims
# with every MiniLM parameter trained. Results (headroom.md, headroom.json, table3-1b/, head/, all/, memory.csv,
# parts/) go to $OUT.
#
#   benchmarks/gpu/headroom.sh [headroom.py options]      e.g. --budget-seconds 400, --parts claims
#
# Variables: those of setup.sh, and DPNC_GPU_TIMEOUT (515: seconds before headroom.py is killed, so that the call,
# setup included, stays under 9 minutes; what was written by then is in $OUT).
set -uo pipefail
source "$(dirname "$0")/setup.sh"
echo "headroom.sh: setup took $(( $(date +%s) - start )) s; PYTHONPATH=$PYTHONPATH"
command -v nvidia-smi >/dev/null && nvidia-smi -L
timeout -k 5 "${DPNC_GPU_TIMEOUT:-515}" "$PY" benchmarks/gpu/headroom.py --out "$RESULTS" --data-dir "$PAY/data" \
    "$@" 2>&1 | tee "$RESULTS/headroom.log"
rc=${PIPESTATUS[0]}
echo "headroom.sh: headroom.py exited $rc after $(( $(date +%s) - start )) s in all"
exit "$rc"
