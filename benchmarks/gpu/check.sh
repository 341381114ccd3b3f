#!/usr/bin/env bash
# The GPU check (benchmarks/gpu/README.md): store the part this call carried, unpack and verify the payload, install
# its wheels, run check.py. Results (check.json, check.md, check.log, cuda_tests.log) go to $OUT.
#
#   benchmarks/gpu/check.sh [check.py options]      e.g. --budget-seconds 400, --parts table3,finetune
#
# Variables: those of setup.sh, and DPNC_GPU_TIMEOUT (455: seconds before check.py is killed; it writes its JSON
# after every measurement, so a kill loses only the measurement under way).
set -uo pipefail
source "$(dirname "$0")/setup.sh"
GGUF=$(ls "$PAY"/gguf/*.gguf | head -n 1)
echo "check.sh: setup took $(( $(date +%s) - start )) s; PYTHONPATH=$PYTHONPATH"

timeout -k 5 "${DPNC_GPU_TIMEOUT:-455}" "$PY" benchmarks/gpu/check.py --out "$RESULTS" --data-dir "$PAY/data" \
    --causal-model "$GGUF" "$@" 2>&1 | tee "$RESULTS/check.log"
rc=${PIPESTATUS[0]}
echo "check.sh: check.py exited $rc after $(( $(date +%s) - start )) s in all"
ls -l "$RESULTS"
exit "$rc"
