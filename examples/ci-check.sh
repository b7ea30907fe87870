#!/usr/bin/env bash
# CI recipe: install dlmcost if it is missing, then fail the build (exit 8) when LLaDA-8B
# dual-cache decoding on an H100 drops below a throughput floor or stops fitting in memory.
#   DLMCOST_PACKAGE   what pip installs when dlmcost is missing [dlmcost]; e.g. a checkout path
#   DLMCOST_PIP_ARGS  extra pip arguments (e.g. --no-deps --no-build-isolation)
#   MIN_TOKENS_PER_S  the floor [300]
set -euo pipefail
if ! command -v dlmcost >/dev/null 2>&1; then
    # shellcheck disable=SC2086  # DLMCOST_PIP_ARGS is a list of words
    python3 -m pip install --quiet ${DLMCOST_PIP_ARGS:-} "${DLMCOST_PACKAGE:-dlmcost}"
fi
dlmcost --version
# --require turns the result into the exit code: 0 = met, 8 = missed (failing rows on stderr).
dlmcost analyze GSAI-ML/LLaDA-8B-Instruct --gpu h100 --scheme dual-cache --gen 256 --block 32 --tpf 3 \
    --require "tokens_per_s >= ${MIN_TOKENS_PER_S:-300}" --require fits --format csv
echo "ok: throughput floor ${MIN_TOKENS_PER_S:-300} tok/s met"
