#!/usr/bin/env bash
# Store one part of the GPU check's payload on the device: benchmarks/gpu/receive.sh K (the call carries .gpu/pK).
# Parts are kept in $DPNC_GPU_STORE (/tmp/dpnc-gpu), which lasts while the machine stays warm.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
part=${1:?usage: receive.sh K   (the part carried in .gpu/pK)}
folder=${DPNC_GPU_DIR:-.gpu}/p$part
[ -d "$folder" ] || { echo "receive.sh: $folder was not carried with this call" >&2; exit 1; }
"$PY" benchmarks/gpu/payload.py receive "$folder"
command -v nvidia-smi >/dev/null && nvidia-smi -L || true
