#!/usr/bin/env bash
# CI recipe: fail the build if LLaDA-8B dual-cache decoding on H100 drops below a throughput floor.
set -euo pipefail
tps=$(dlmcost analyze GSAI-ML/LLaDA-8B-Instruct --gpu h100 --scheme dual-cache --gen 256 --block 32 --tpf 3 \
      --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["tokens_per_s"])')
python3 -c "import sys; sys.exit(0 if float('$tps') >= 300 else 1)" || { echo "throughput $tps < 300 tok/s"; exit 1; }
echo "ok: $tps tok/s"
