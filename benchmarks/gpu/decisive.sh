#!/usr/bin/env bash
# The declared decisive DPZero run on one GPU (benchmarks/gpu/README.md, "The decisive run"): store the part this call
# carried, unpack the payload (setup.sh), run decisive.py: the 20-seed design, cell after cell, resumable. Results
# (rows.jsonl, decisive.json, decisive.log) go to $OUT.
#
#   benchmarks/gpu/decisive.sh [decisive.py options]      e.g. --rows .gpu/rows.jsonl (an earlier call's rows)
#
# Variables: those of setup.sh, and DPNC_GPU_TIMEOUT (515: seconds before decisive.py is killed, so that the call,
# setup included, stays under 9 minutes; every finished cell is already in $OUT/rows.jsonl).
set -uo pipefail
source "$(dirname "$0")/setup.sh"
echo "decisive.sh: setup took $(( $(date +%s) - start )) s; PYTHONPATH=$PYTHONPATH"
command -v nvidia-smi >/dev/null && nvidia-smi -L
timeout -k 5 "${DPNC_GPU_TIMEOUT:-515}" "$PY" benchmarks/gpu/decisive.py --out "$RESULTS" --data-dir "$PAY/data" \
    --budget-seconds "${DPNC_DECISIVE_BUDGET:-$(( ${DPNC_GPU_TIMEOUT:-515} - $(date +%s) + start - 20 ))}" \
    "$@" 2>&1 | tee "$RESULTS/decisive.log"
rc=${PIPESTATUS[0]}
echo "decisive.sh: decisive.py exited $rc after $(( $(date +%s) - start )) s in all"
exit "$rc"
