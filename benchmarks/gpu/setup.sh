# Sourced by check.sh and dimension.sh (benchmarks/gpu/README.md): store the part this call carried, unpack and verify
# the payload, install its wheels, set PYTHONPATH. Sets ROOT, PY, PAY (the unpacked payload), RESULTS ($OUT) and start.
# Variables: PYTHON (python3), OUT (.gpu/out), DPNC_GPU_DIR (.gpu: the carried parts), DPNC_GPU_STORE
# (/tmp/dpnc-gpu), DPNC_GPU_SITE (/tmp/site: where the wheels are installed), DPNC_GPU_LINK_DATA (1: link
# ../shared/data to the payload's data if missing, for tests/lm).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
STORE=${DPNC_GPU_STORE:-/tmp/dpnc-gpu}
SITE=${DPNC_GPU_SITE:-/tmp/site}
RESULTS=${OUT:-$ROOT/.gpu/out}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)

for d in "${DPNC_GPU_DIR:-.gpu}"/p*/; do   # the part(s) this call carried
    [ -f "$d/MANIFEST.json" ] && { "$PY" benchmarks/gpu/payload.py receive "$d" --store "$STORE" || exit 2; }
done
"$PY" benchmarks/gpu/payload.py assemble --store "$STORE" || exit 2
PAY=$STORE/payload
if ls "$PAY"/wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$PAY"/wheels/*.whl || exit 3
fi
export PYTHONPATH="$SITE:$PAY/site:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
# tests/lm read their data from ../shared/data beside the repository (DPNC_GPU_LINK_DATA=0: leave it).
if [ "${DPNC_GPU_LINK_DATA:-1}" != 0 ] && [ ! -e "$ROOT/../shared/data" ]; then
    mkdir -p "$ROOT/../shared" && ln -s "$PAY/data" "$ROOT/../shared/data"
fi
