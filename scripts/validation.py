"""Generate docs/validation.md: predicted vs published time per forward and tokens/s.

    python scripts/validation.py            # rewrite docs/validation.md
    python scripts/validation.py --check    # exit 1 if the page is stale

Each point of validation/published.yaml is predicted with its own stack (`stack:`), and also
with the hardware roofline alone (no stack), to show what the stack changes. Each point of
validation/serving.yaml (a deployment under load) is its `dlmcost serve` command, run in-process
with `-f json`, against the published throughput and latency.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs"))

from dlmcost.calibration.measurements import analysis_for, compare, load_points  # noqa: E402
from dlmcost.inputs.error_bands import MIN_NUMBERS  # noqa: E402
from dlmcost.inputs.stacks import EAGER_SUFFIX  # noqa: E402
from dlmcost.inputs.yaml_loader import load_yaml  # noqa: E402 - refuses a repeated key

# A row reproduced with the CLI; a cogapp block, so that `docs/generate.py --check` verifies it too.
EXAMPLE = ("dlmcost analyze GSAI-ML/LLaDA-8B-Instruct --gpu a100 --scheme prefix-cache --prompt 900 --gen 256 "
           "--steps 256 --block 32 --stack hf-eager")
DATA = ROOT / "validation" / "published.yaml"
PAGE = ROOT / "docs" / "validation.md"
SERVING = ROOT / "validation" / "serving.yaml"
# The issue's targets for serving (checked and reported, not enforced: the page says whether they hold)
TARGET_MEDIAN = 1.3  # median error at concurrency >= 8
TARGET_WORST = 2.0  # worst error at concurrency >= 8
TARGET_OPTIMISM = 1.5  # predicted speed / measured speed at a batch of >= 32 running requests
# The headline: every number scored against numbers fitted on other publications only (CI checks it)
TARGET_OUT_OF_SOURCE_MEDIAN = 1.3
TARGET_OUT_OF_SOURCE_WORST = 2.0
# while a target is not met, the headline may not get worse than it was when this was recorded
# (tests/test_validation.py). Both moved with GPUStack's vLLM DeepSeek-R1 bursts (GPS, added as a new source),
# the worst once more with the prefill budget (a change of the model, not a fit). The worst out-of-source error
# is 9.41x, the mean TTFT of GPS's 1,000 requests of 128 tokens: the budget prefills 64 of them a step, where
# every prompt admitted at once used to share one long pass, whose length hid the per-request work of vLLM's
# API server that no stack number describes (their throughput, 6.66x, set the worst before; 4.18x, the mean
# TTFT of InferenceX's DeepSeek-R1 SGLang run at concurrency 8, before GPS; 2.51x, the vLLM dLLM plugin's eager
# run at one request, before IFX). The median, 1.26x and met before GPS, became 1.31x: GPS's 12 numbers were all above 1.3x (11 since the budget).
# The SGLang cookbook's Llama 3.1 page (SGCL, a new source) moved the worst to 15.13x, the mean TTFT of its
# 320 prompts of up to 8,000 tokens at 64 in flight (sgcl-llama31-70b-a100tp8-sglang-8k1k-c64, pessimistic:
# the simulation prefilled each wave of 64 prompts in one pass), and the median to 1.32x (1.317). The sglang
# stack's prefill budget (its --chunked-prefill-size, 8192: a prefill batch holds at most that many prompt
# tokens, a change of the model from SGLang's scheduler, not a fit) brings that point to 4.79x (the run's
# first requests most likely found their prompts in the radix cache) and the worst back to GPS's 9.41x.
# The prefix cache (`--cached-prompt`, a change of the model with the SGCL runs' cache hits derived from
# bench_serving's draws, not fitted) and IFX at its launch's prompt budget (32,768, as published) move the median to
# 1.33x: SGCL's TTFTs come down (4.79x to 1.61x at the worst), its throughputs and TPOTs, whose prefill the cache
# saves, go up (1.04-1.56x to 1.43-1.59x optimistic: the A100 TP8 decode is too fast in the model, 1.28x at one request).
# The GEMMs' weight-streaming rate per precision from NVIDIA aiconfigurator's measured GEMMs (A100 bf16 0.71 of peak
# and 4.6 us a kernel, H100 bf16/fp8 0.83/0.77 and 3.2/5.4 us, H200 0.81/0.71 and 3.4/5.6 us, in place of the
# generic 0.8 and 3 us that every other op keeps: kernel microbenchmarks, not validation points; the fitted rows
# scales and tokens per forward refitted with them) bring it to 1.32x (1.318) and the worst to 9.30x: SGCL's A100
# TP8 decode 1.28x -> 1.14x optimistic at one request, IFX's fp8 DeepSeek throughput 1.22-1.34x -> 1.06-1.15x.
# A fused MoE block's six kernels (two grouped GEMMs at the streaming rate, four small ones: aiconfigurator's
# measured DeepSeek-V3 block at TP8 on an H200, 36.4 us, is what they add up to) bring it to 1.31x (1.307) and
# the worst to 9.26x: IFX 1.00-1.08x optimistic, DiffusionGemma on SGLang (DGEM) 1.16-1.47x.
# Decode's attention at its measured rate (aiconfigurator's SGLang decode-attention timings: the A100 at 0.46
# of peak and 16.5 us a kernel, the H100/H200 at 10.6/11.1 us; kernel microbenchmarks, not validation points)
# brings the median to 1.27x, under its 1.3x target for the first time since GPS, and the worst to 9.25x: SGCL's
# A100 TP8 decode 1.14x -> 1.07x optimistic at one request, 1.40-1.49x -> 1.26-1.38x under load.
# Then the engine's front end (a change of the model: the vllm stacks' API server, one of 5 ms a request, from vLLM
# PR #43469's mock-engine front end, not from a validation point) brings the worst to 7.26x, GPS's 1,000-request
# burst's mean TTFT (its throughput 5.43x -> 4.22x), the median staying 1.27x: the same burst's mean TPOT went
# from 1.22x to 2.41x optimistic (its requests now reach the engine 5 ms apart and decode in small batches, where
# the measured ones took 352 ms a token), and DiffusionGemma on vLLM (DGEM, closed loops of 1-8 users) moved by
# -0.18 to +0.11.
# Then attention at k / (k + k0) of its rate for k keys per query (k0 fitted to aiconfigurator's kernel timings of
# vLLM's and SGLang's prefill attention, not to validation points; the fitted sustained_compute and tokens per
# forward refitted with it) and the all-reduces' bandwidth by message size from aiconfigurator's measured NCCL
# all-reduces (0.85-0.92 of the large-message figure at the 64-128 MiB of a DeepSeek-V3 prefill chunk, where the
# scaling book's single figure gave 0.41-0.50; a kernel measurement, not a fit) move the median to 1.30x (1.298)
# and the worst to 7.45x: the DeepSeek-R1 TP8 points were already optimistic, and their prefill passes lose half
# their all-reduce time (an 8,192-token prefill: 147 -> 81 ms of it), so IFX's TTFTs go 1.61-4.03x -> 1.81-5.07x,
# GPS's burst 7.26x -> 7.45x, and SGCL's one-request TTFTs 1.25-1.68x -> 1.49-1.85x.
# Then the routed experts' fused MoE kernel at its measured rates (the sglang and vllm stacks' fused_moe: a depth
# overhead of 4.1-4.2 ridges and an fp8 rate of 0.83 / 0.68, fitted to aiconfigurator's timings of whole fused MoE
# blocks on H100 and H200: kernel microbenchmarks, not validation points; the tokens per forward refitted with them)
# brings the median to 1.26x (1.265) and the worst to 7.04x: DeepSeek-R1's prefill-heavy numbers come down (an
# 8,192-token prefill chunk's experts 1.1 -> 2.7 ms a layer against 2.3-2.4 measured; GPS's TPOTs 1.90-2.05x ->
# 1.56-1.72x and its 1,000 short requests' TTFT 7.45x -> 7.04x, IFX's TTFTs 1.81-5.07x -> 1.45-4.01x).
# Then two more AR sources, as published (nothing fitted on them): GPUStack's Qwen3-8B latency page (GPS's publisher,
# the same key: vLLM at 1-8 in flight, SGLang bf16 and FP8 at 4, one H100) and the vLLM blog's FP8 K/V cache post
# (VKV, a new source: Llama-3.1-8B on one H100 at 8 in flight, 20k-token prompts) add 20 numbers; the median becomes
# 1.25x (1.265 -> 1.250) over 109 numbers from 13 publications, the worst staying 7.04x. Their throughputs and
# TPOTs are within 1.13x; their TTFTs are not (vLLM's at low load 2.09-3.95x optimistic, the FP8 SGLang run's
# 2.33x, VKV's median 1.66x pessimistic), the largest new errors.
# Merged beside the Blackwell parts' measured GEMM-streaming and decode-attention rates: 1.246x median, 7.04x worst.
# (GPUStack's Qwen3-8B vLLM TTFTs then 1.85-3.95x with the shared API servers below.)
# Then the front end's requests sharing its API servers (a change of the model: each server is one asyncio loop
# that advances every request it holds in turn, so a burst reaches the engine together at N x 5 ms instead of one
# 5 ms apart; vLLM's chat handler and Python's asyncio documentation, not a fit) brings the median to 1.25x and the
# worst to 4.01x, IFX's mean TTFT at concurrency 8 (unchanged: SGLang has no front end here): GPS's 1,000-request
# burst 7.04x -> 2.60x in mean TTFT and 4.15x -> 2.26x in throughput, its mean TPOT 1.63x -> 1.04x (the requests
# now decode together, as the measured 352 ms a token says), GPS's 2k and 4k bursts 1.18-1.40x -> 1.18-1.25x, and
# DiffusionGemma's vLLM closed batches of 4 and 8 (DGEM) 1.01-1.24x pessimistic -> 1.12-1.16x optimistic.
# Merged with the two AR sources above and the Blackwell rates: 1.22x (1.224) median over 109 numbers, 4.01x worst.
# Then an MoE layer's dispatch without CUDA graphs (the sglang and vllm stacks' eager us_per_moe_layer, 650 us:
# SGLang PR #1401's eager-against-graphed DeepSeek-Coder-V2-Lite decode, not a validation point) brings VPLUG's
# --enforce-eager LLaDA2.0-mini 2.21x -> 1.42x at one request and 1.50x -> 1.11x at 5 req/s: the median 1.26x
# (1.263), the worst unchanged. VPLUG's Phase 7 runs (TP1 and TP2, 2026-05-09) then run --eager too, as the
# plugin's Known Limitations of that date say ('CUDAGraph support explicitly disabled in Phase 7 MVP'): the TP1
# sync point refits its tokens per forward 5.47 -> 9.06, and TP2 at one request goes 2.26x -> 1.76x optimistic
# (the eager dispatch does not shrink with TP), its 5 req/s latency 1.61x -> 1.34x, TP1's 10 req/s 1.54x -> 1.42x;
# the median and the worst unchanged.
# All merged (the two AR sources, the Blackwell rates, the shared API servers, the eager MoE dispatch): out of
# source 109 numbers, median 1.20x (1.203), worst 4.01x (IFX's mean TTFT at concurrency 8).
# Then each simulated request runs its own answer's passes (a change of the model, nothing fitted: the pass
# times stay its length class's, the pass count is its own), where every request of a class had run the class
# mean's: a closed loop's completions then came in waves of a class, and the refills' prefills queued behind
# each other. SGCL's mean TTFT at 100 in flight, the one large pessimistic error, goes 2.53x pessimistic ->
# 1.06x optimistic; the SGLang TTFTs at lower loads, which those queues had brought near the measurements, lose
# them: SGCL 1.02x -> 2.27x optimistic at 16 in flight with 1,000-token prompts, 1.13x / 1.58x pessimistic ->
# 1.39x / 2.06x optimistic at 16 / 64 with 8,000-token ones (as at one request, 1.49-1.86x optimistic), IFX
# 4.01x, 2.80x, 1.93x, 1.45x -> 5.16x, 3.93x, 3.08x, 2.23x at 8-64: every out-of-source first token is now
# early (the first-token band 0.66-3.20x -> 1.06-3.86x), a per-request first-token cost SGLang has and the
# model does not. The median becomes 1.22x (1.224), the worst 5.16x (IFX's mean TTFT at concurrency 8).
# Then SGLang's prompt prefills run eagerly, its CUDA graphs covering decode only (0.5.x: prefill graphs are its
# experimental piecewise runner, off by default), charged the stack's measured eager dispatch, with 15 us more a
# tensor-parallel all-reduce launched from Python (aiconfigurator's SGLang all-reduce, eager against graphed),
# once per iteration that prefills: a change of the model, nothing fitted. IFX's mean TTFT 5.16x, 3.93x, 3.08x,
# 2.23x -> 3.14x, 2.70x, 2.38x, 1.81x at 8-64 (DeepSeek-R1's 58 MoE layers wait 41 ms a prefill), SGCL's 1.86x /
# 1.49x at one request -> 1.74x / 1.46x (80 dense layers: 4.6 ms), GPS's SGLang Qwen3-8B 1.00x optimistic -> 1.03x
# pessimistic. The median stays 1.22x (1.224); the worst becomes 3.95x (GPS's vLLM TTFT at one request).
# Then the vllm stack's first-token dispatch delay, 0.8 ms a model layer (NVIDIA aiconfigurator's vLLM overhead,
# calibrated on its own measured serving runs, none of these points; a wait after the API server that holds no
# server or GPU): GPS's Qwen3-8B vLLM mean TTFTs at 1, 2, 4, 8 in flight 3.95x, 3.24x, 2.39x, 1.85x -> 1.35x,
# 1.38x, 1.20x, 1.07x optimistic (their throughputs 1.02-1.08x -> 1.00-1.07x); VKV's median TTFT 1.66x -> 2.56x
# pessimistic (the 8 users' identical 20k-token requests, 25.6 ms later each, now meet the median refill queued
# behind another's chunked prefill: 1.27 s -> 1.96 s predicted, 0.76 s measured); GPS's DeepSeek-R1 vLLM bursts
# move under 1%. The median 1.20x (1.196), the worst unchanged.
# Merged after SGLang's eager prefills (above): out of source 109 numbers, median 1.20x (1.196), worst 3.14x (IFX's
# mean TTFT at 8 in flight).
# Then a request's memory share under a prefill token budget (vLLM's and SGLang's chunked prefill) counts one
# workspace of the budget's tokens, not every running prompt's activations at once (a change of the model,
# nothing fitted): more requests fit, and GPS's DeepSeek-R1 vLLM bursts decode in larger batches, their mean
# TPOTs 1.56-1.72x -> 1.05-1.20x optimistic, their throughputs 1.10-1.22x -> 1.12-1.30x and mean TTFTs
# 1.08-1.25x -> 1.10-1.33x optimistic. The median 1.20x (1.203), the worst unchanged.
# All three merged (SGLang's eager prefills, vLLM's first-token delay, the budget's memory share): out of source
# 109 numbers, median 1.20x (1.196), worst 3.14x (IFX's mean TTFT at 8 in flight), recorded below.
# Then 30 more numbers out of source, nothing fitted on them: NVIDIA aiconfigurator's measured SGLang runs of
# DeepSeek-R1 FP8 on 8x H200 (AICS: every sglang agg row of its config 81, 1k/1k, 1k/8k, 8k/1k at 4-64 in flight;
# TTFT 1.17-2.78x optimistic, TPOT 1.00-1.18x pessimistic). Out of source 139 numbers, median 1.19x (1.187),
# worst unchanged at 3.14x (IFX's mean TTFT at 8 in flight).
# Then the ar scheme samples an answer's first token from its prefill's logits and runs A - 1 decode steps
# (A passes, where it had run 1 + A), as vLLM, SGLang and Hugging Face generate do (a change of the model,
# nothing fitted; the fits' values are unchanged at their files' precision): GPS's 1,000 4-token requests' mean
# TPOT 1.04x -> 1.35x optimistic (4 decode steps had filled the 3 gaps between their 4 tokens), SGCL's mean
# TTFT at 16 in flight with 8,000-token prompts 1.38x -> 1.35x optimistic; no other out-of-source number moves
# by 2%. The median 1.20x (1.196), the worst unchanged at 3.14x.
# Then VKV's lengths as `vllm bench serve` draws them (its random dataset at range ratio 0.15 and its default seed 0,
# the post's '±15% variance'; the drawn answers' total is the published output tok/s x duration within rounding),
# where every request had been 20,000 / 2,019 tokens: a change of the point, not of the model. Its eight users'
# identical requests had kept in lockstep, the median refill queued behind another's chunked prefill; with the
# spread they drift apart, and its median TTFT goes 2.56x -> 1.13x pessimistic (1.96 s -> 0.86 s predicted, 0.76 s
# measured), its throughput 1.04x -> 1.05x pessimistic. The median 1.19x (1.187), the worst unchanged at 3.14x.
# Then `serve` learned SGLang's --scheduler-recv-interval (--recv-interval) and an FP8 K/V cache (--kv-dtype), and
# 22 more numbers out of source, nothing fitted on them: the same aiconfigurator corpus's B200 rows of the same
# InferenceX run (config 87: DeepSeek-R1 FP8, 8x B200 TP8, fp8_e4m3 K/V, receive interval 10 below 16 in flight
# and 30 from 16; 1k/1k and 1k/8k at 4-64, 8k/1k at 4): TPOT 1.01-1.11x, TTFT 1.38-2.14x optimistic (without the
# receive interval the TTFTs at 16-64 in flight would be 2.6-5.7x optimistic: arrivals wait up to 30 decode steps
# unseen). Out of source 161 numbers, median 1.19x (1.187), worst unchanged at 3.14x.
# And VKV's FP8 row (the post's --kv-cache-dtype fp8, now --kv-dtype fp8): throughput 1.06x optimistic, median
# TTFT 1.13x pessimistic. Out of source 163 numbers, median 1.18x (1.179), worst unchanged at 3.14x.
# Then `serve` learned the engine's memory fraction (--mem-fraction, SGLang's --mem-fraction-static), and the
# same B200 run's TP4 rows (config 271: 8k/1k at 4-32, fraction 0.95, where the K/V cache is the binding limit):
# TPOT 1.03-1.06x pessimistic, TTFT 2.03-2.17x optimistic. Out of source 171 numbers, median 1.18x (1.179), worst
# unchanged at 3.14x.
# The same corpus's B300 rows of that recipe (configs 719 and 720, SGLang 0.5.10, InferenceX PR #1050) were read
# and left out, nothing added: their client tokenizer sent prompts about 5x the asked lengths (InferenceX #937,
# #1381), and `serve` at the asked lengths is 2.9-9.4x optimistic on their TTFT (1.7-2.2x at five-fold prompts).
# Merged after the B200 TP4 rows: out of source still 171 numbers, median 1.18x (1.179), worst 3.14x.
# Then 48 points of the same corpus's vLLM runs of MiniMax-M2.5 FP8 in the same harness (H200 TP8 EP8 on 0.18.0,
# H200 TP4 on 0.16.0, H100 TP4 EP4 on 0.18.0), nothing fitted on them: their 48 TPOTs out of source (0.65-1.19x),
# their TTFTs in source (the vllm stack's first-token delay is aiconfigurator's fit over this corpus). Out of source
# 219 numbers, median 1.16x (1.158), worst unchanged at 3.14x.
# Then 29 points of its B200 rows of MiniMax-M2.5 FP8 (vLLM 0.19.0 TP2, TP4, TP2 EP2 and TP4 EP4 with an FP8 K/V
# cache; 0.17.0 TP2 EP2 and TP4 EP4 at 1k/8k; 4, 16, 64 and 256 in flight of the sweeps' 4-512), nothing fitted on
# them: their TPOTs out of source (0.84-1.25x), their TTFTs in source. Out of source 248 numbers, median 1.14x
# (1.142), worst unchanged at 3.14x.
RECORDED_OUT_OF_SOURCE_MEDIAN = TARGET_OUT_OF_SOURCE_MEDIAN  # met: held to its target
# Then the SGLang cookbook's DeepSeek-R1 page (SGCR, a new source: 8x B200 TP8, SGLang 0.5.6.post1, default
# launch; nine runs, 36 numbers, nothing fitted on them) moved the worst to 8.68x, its mean TTFT at 64 in flight
# with 8,000-token prompts (sgcr-dsr1-fp8-b200tp8-sglang-8k1k-c64, optimistic: read as SGCL's runs are, the radix
# cache holds that run's first wave; 1.63x without it), and the median to 1.16x (1.162). Its TTFTs are all
# optimistic (1.80-8.68x), its TPOTs and throughputs 1.08-1.28x.
# And the same cookbook's MiniMax-M2.5 page (SGCM, a new source: 8x B200 TP8 EP8 on SGLang 0.5.8, six runs, and 8x
# H100 TP8 EP8 on 0.5.9, three runs; 36 numbers, nothing fitted on them) moved the worst to 10.30x, its B200 mean
# TTFT at 64 in flight with 8,000-token prompts (sgcm-minimax-m25-fp8-b200tp8ep8-sglang-8k1k-c64, optimistic; 2.86x
# were no prompt cached), and the median to 1.18x (1.178). Its B200 decode is 1.42-1.78x optimistic, its H100
# decode 1.10-1.16x; every TTFT optimistic (1.80-10.30x).
# And its DeepSeek-V3.1 page (SGCV, a new source: 8x MI300X TP8, SGLang 0.5.7, default launch, nine runs, 36
# numbers, nothing fitted on them; the first measured MI300X serving numbers here): every number optimistic,
# decode 1.94-4.11x (TPOT 6.0 ms predicted at one request, 23.8-24.9 ms measured), TTFT 3.31-8.41x; the median to
# 1.21x (1.215), the worst unchanged.
# Then SGLang's eager MoE layer measured on a prefill (the sglang stacks' us_per_moe_layer 650 -> 965 us: SGLang PR
# #12160's DeepSeek-V3 prefill of one new token, 82.6 ms eager against 23.1 ms graphed; not a validation point, and
# the same release line's launches the SGCR/SGCM/SGCV/IFX/AICS points run) adds 18 ms to DeepSeek's TP8 prefills and
# 20 ms to MiniMax-M2.5's: their one-request TTFTs 1.80-2.57x -> 1.50-1.87x (SGCR), 2.06-2.29x -> 1.58-1.72x (SGCM),
# the worst 10.30x -> 7.98x (the same SGCM B200 point), the median 1.216x -> 1.199x; the already pessimistic
# DeepSeek TPOTs (AICS) and IFX throughput move up to 3% further pessimistic.
# dstack's DeepSeek-R1 MI300X-vs-H200 post (DSTK: 8x MI300X TP8, SGLang 0.4.2.post4 and vLLM 0.7.3's V0 engine,
# releases of February 2025 that no stack describes) is shown apart, not modelled: scored, its SGLang runs would
# move the worst to about 18x (a mean TTFT at 32 in flight) and widen the AMD bands, but
# the same post's H200 runs on SGLang 0.4.3.post2 miss by as much (43.6 ms a token at 4 in flight, 10.6 ms
# predicted), so those misses measure the release, not the part. The same cookbook's MiniMax-M2 page on 4x MI300X
# (SGCM2, TP4, SGLang 0.5.7, another author than SGCV's; nine numbers scored) decodes 4.41x slower than predicted at
# one request, as SGCV does: the AMD bands rest on two publications; the median 1.199x -> 1.203x, the worst unchanged.
# The MI300X/MI325X/MI355X collective latency, 10 us assumed, became the published small-message custom
# all-reduce time (7.4/7.4/6.5 us): SGCV's and SGCM2's one-request TPOTs 0.3 ms faster predicted (3.97-4.41x ->
# 4.20-4.72x); the headline unchanged (365, 1.203x, 7.98x).
# MLPerf Inference v5.1's audited Offline runs (MLP51A: AMD's Mixtral-8x7B FP8 on MI325X and MI300X, vLLM 0.9 V0 in
# process, one engine a GPU; MLP51R: Red Hat's Llama-3.1-8B FP8 on one H100, vLLM 0.10) add three throughputs, 1.07x,
# 1.15x and 1.12x optimistic: tuned AMD runs at large batch sit where the NVIDIA ones do, not at the cookbook's
# 1.9-4.1x (whose misses are decode at 1-100 in flight). HPE's TensorRT-LLM H200 run (MLP51H) is not modelled.
# The median 1.203x -> 1.202x, the worst unchanged.
# InferenceX's DeepSeek-R1 FP8 curves on SGLang 0.5.12 (IFX12: 8x H200 TP8 and B300 TP8 / TP4, 66 numbers, the
# sglang-pcg stack's second publication): decode within 1.02x optimistic and 1.17x pessimistic, the mean TTFT
# 1.13-3.02x optimistic; the median 1.203x -> 1.191x, the worst unchanged.
# The MI300X/MI325X decode kernels' measured times at a few rows, from aiter's tuning tables (weight_streaming fp8:
# 3.8 us + bytes / (0.40 x peak), least squares over 245 tuned block-scale GEMM times at 1-64 rows on the 304-CU die;
# experts_streaming fp8: 2 x 14.0 us + bytes / (0.80 x peak) over 19 tuned fused MoE blocks; decode_attention 15.5 us,
# aiter's MLA decode kernel, ROCm/aiter PR #2039; where every op had the generic 0.75 BW + 3 us): SGCV's and SGCM2's
# one-request TPOTs 4.20-4.72x -> 2.79-3.11x, their loaded ones 1.9-3.1x -> 1.78-2.74x; MLPerf's AMD Offline runs
# 1.07x/1.15x -> 1.06x/1.14x; sglang's AMD band 1.91-4.34x -> 1.79-2.91x; numbers over 2x 71 -> 68; the median
# 1.191x -> 1.191x, the worst unchanged (nothing fitted on a validation point). Two steps on the way were replaced
# before this was recorded: a fit to six one-row GEMM times (3.2 us, 0.30) and the experts at the dense GEMMs' rate,
# which made the measured fused blocks about 2x too slow and the loaded misses look smaller (1.20-2.09x) than they are.
# Then the sglang stack's slow_kernels: SGLang 0.5.x's untuned gfx942 FP8 kernels, 243 us a decoder layer on the MI300X
# and MI325X at fp8, fitted on SGCM2's one-request TPOT (its nine numbers now in source) and scored on SGCV: SGCV's
# one-request TPOTs 2.79-2.90x -> 1.02-1.06x, its loaded ones 1.82-2.74x -> 1.09-1.70x (the most with 8,000-token
# prompts), its TTFTs 2.30-7.58x -> 1.89-7.13x; sglang's AMD band 1.79-2.91x -> 1.04-1.60x; 442 -> 433 numbers,
# over 2x 68 -> 42 (all but GPS's H200 throughput, 2.27x, times to the first token), the median 1.191x -> 1.164x, the worst unchanged.
# Then the sglang stack's first-token delay (front_end.first_token_us_per_layer, 978 us a decoder layer, inherited by
# sglang-pcg): a wait before each request's first token that holds neither a server nor the GPU, fitted on SGCR's
# three one-request runs (least squares on the log ratio: 59.7 ms over DeepSeek-R1's 61 layers; SGCR's nine TTFTs now
# in source). Out of source 433 -> 424 numbers, the median 1.164x -> 1.136x, the worst 7.98x -> 5.71x (now SGCV's
# MI300X mean TTFT at 16 in flight with 8,000-token prompts), numbers over 2x 42 -> 12; the mean TTFTs with 1,024-token
# prompts on 8x H200 (AICS, IFX, IFX12) 1.58-3.02x -> 1.14-1.68x optimistic, SGCM's on B200 under load 2.99-7.98x ->
# 1.74-4.10x. It overshoots at fewer GPUs: GPS's Qwen3-8B on one H100 2.30x pessimistic (was 1.03x pessimistic),
# SGCM7's MiniMax-M2.7 on 2x GB300 at one request 1.77x pessimistic (was 1.78x optimistic), IFX12's B300 TP8 at one
# request 1.33x pessimistic (was 2.06x optimistic).
# ROCm/aiter PR #1930's DeepSeek-R1 TP8 MI300X median TPOTs (AITR, a new source: SGLang at 1k/1k, 4-32 in flight,
# before and after tuning the 2,112 x 7,168 FP8 GEMM; eight numbers, scored as the simulated requests' median TPOT
# (the new metric tpot_p50_ms: serve's median inter-token gap), nothing fitted on them):
# before 1.14-1.52x optimistic, after 1.01-1.14x pessimistic; sglang's AMD band 1.04-1.60x -> 1.00-1.56x (27 -> 35
# numbers, two publications); 424 -> 432 numbers, the median 1.1360x -> 1.1368x, the worst unchanged.
# InferenceX's DeepSeek-R1 FP8 curve on 8x MI325X on SGLang 0.5.19 (IFX19, sglang-pcg, 8,192-token prompts at 4-64
# in flight, 15 numbers, nothing fitted on them): decode 1.37x pessimistic to 1.22x optimistic, throughput 1.31x
# pessimistic to 1.21x optimistic, the mean TTFT 1.51-2.55x optimistic; the AMD first-token band 1.34-4.15x (9
# numbers, one publication) -> 1.43-3.62x (14, two); 432 -> 447 numbers, over 2x 12 -> 14 (its TTFTs at 4 and 8 in
# flight), the median 1.1368x -> 1.1410x, the worst unchanged.
# Then the sglang stack's slow_kernels grew with the pass: L x (us_per_layer + tokens x us_per_token_layer), tokens the
# pass's batch x query tokens, 0.65 us a layer a token fitted by least squares on the log ratio of SGCM2's six loaded
# speed numbers (throughput, mean E2E, mean TPOT at 16 and 100 in flight; TTFTs left out), 242.5 us a layer refitted
# on its one-request TPOT (243.16 - 0.65; SGCM2 was in source already): SGCV's loaded TPOTs 1.09-1.71x -> 1.07-1.44x
# optimistic, its TTFTs 1.10-5.71x -> 1.10-3.36x; AITR's before runs 1.14-1.52x -> 1.14-1.49x optimistic, its after
# runs 1.01-1.14x -> 1.03-1.15x pessimistic; IFX19 (0.5.19, a later release) worse: decode 1.37x pessimistic to 1.22x
# optimistic -> 1.14-1.43x pessimistic, the mean TTFT 1.51-2.55x optimistic -> 1.32x optimistic to 1.54x pessimistic
# (pessimistic at 8-64 in flight). sglang's AMD band 0.81-1.56x -> 0.72-1.39x, its AMD first-token band 1.43-3.62x ->
# 0.73-2.84x; 447 numbers, over 2x 14 -> 11, the median 1.1410x -> 1.1374x, the worst 5.71x -> 4.10x (now SGCM's B200
# MiniMax-M2.5 mean TTFT at 64 in flight with 8,000-token prompts, unchanged by this).
# Then SGCQ (the cookbook's Qwen3-Coder-480B-A35B page, 8x MI300X TP8 EP2, SGLang 0.5.7 with aiter off, 12 numbers,
# nothing fitted): 447 -> 459 numbers, the median 1.1374x -> 1.1409x, the worst unchanged (4.10x), over 2x 11; sglang's
# AMD speed band 0.72-1.39x -> 0.73-1.38x.
# Then the Blackwell parts' fp8 and fp4 GEMMs at the rate ratio to bf16 that the engines' own GEMMs measured there
# (aiconfigurator's SGLang 0.5.9 tables: fp8 1.39-1.41x bf16's rate, where MAMF's cuBLAS microbenchmark gave 1.95x;
# kernel timings, not validation points): B200 fp8 0.75 -> 0.543 of its peak. 165 numbers move, 94 closer, 71 further
# (by at most 0.044); IFX12's B300 TP4 TTFTs 1.65-1.87x -> 1.50-1.70x optimistic, AICS's B200 TP4 ones 1.61-1.72x ->
# 1.49-1.59x; the worst 4.10x -> 4.06x (the same SGCM point), the median 1.1409x -> 1.1410x; the first-token band on
# NVIDIA parts 0.88-1.71x -> 0.88-1.59x.
# Then SGCQ3 (the cookbook's Qwen3 page: Qwen3-235B-A22B-Instruct-2507 bf16 on 8x B200 TP8, SGLang 0.5.6, the same
# nine random runs as SGCR's, 36 numbers, nothing fitted): 459 -> 495 numbers, the median 1.1410x -> 1.1410x, the
# worst unchanged (4.06x), over 2x 11 -> 12 (its mean TTFT at one request with 1,000-token prompts, 2.12x
# pessimistic); sglang's NVIDIA speed band 0.90-1.39x -> 0.90-1.36x, its NVIDIA first-token band 0.88-1.60x ->
# 0.78-1.59x.
# Then V23151 (vLLM PR #23151's baseline: Qwen3-30B-A3B bf16 on one H100, vLLM about 0.10.1, random 2,048 / 1,024 at
# 10 in flight, 3 numbers, nothing fitted): 495 -> 498 numbers, the median 1.1410x -> 1.1389x, the worst unchanged
# (4.06x), over 2x 12; the vllm stack's speed band 0.87-1.28x -> 0.87-1.27x, its first-token band 0.88-1.50x -> 0.88-1.38x.
# Then the median first token scored where a run publishes it (its mean listed beside it, not scored: a mean over a
# run's few requests carries its slowest, the first after the server's launch among them; SGCM2's one-request run:
# mean 4,529 ms, median 385 ms). 94 medians entered from the publications (the SGLang cookbook's eight pages, GPUStack,
# dstack, vLLM PR #23151; InferenceX, aiconfigurator's corpus and the WX report print means only), and the sglang
# stack's first-token delay refitted on SGCR's three one-request medians (820 us a layer, was 978 on their means).
# 498 numbers, the median 1.1389x -> 1.1446x, the worst 4.06x -> 3.40x (SGCV's MI300X median TTFT at 16 in flight
# with 8,000-token prompts, 1,347 ms measured, 2.7x the same server's median at 64 in flight; 397 ms predicted),
# numbers over 2x 12 -> 7. The means that left the headline: 49 out of source, median error 1.35x, worst 4.41x.
# The medians expose what the means hid: SGCM's H100 runs, whose means the model met (1.00-1.29x), are 1.72-1.76x
# pessimistic on their medians, and SGCQ3's medians 1.88-2.23x: the per-layer first-token costs fitted on DeepSeek.
# Then SGCG (the cookbook's GLM-4.6 page: bf16 on 8x B200 TP8, SGLang 0.5.6.post1, the same nine random runs as SGCR's,
# 36 numbers, nothing fitted; a glm4_moe family added for it): 498 -> 534 numbers, the median 1.1446x -> 1.1593x, the
# worst unchanged (3.40x), none of its numbers over 2x (its one-request decode 1.83-1.85x optimistic, the largest).
# Then the Blackwell parts' bf16 fused MoE blocks at their measured rate (aiconfigurator's timings of SGLang's Triton
# fused MoE at 1-64 tokens: 2 x 10.3-12.3 us + bytes / (0.61-0.63 x peak), where the dense GEMMs' rate put the blocks at
# 0.69-0.73 of their time; kernel timings, not validation points; bf16 only, fp8's runner being a launch's choice): 72
# numbers move, all SGCQ3's and SGCG's, their decodes at one request 1.35-1.37x -> 1.11-1.13x and 1.83-1.85x -> 1.54-1.56x
# optimistic, their median TTFTs at most 0.04 further; the median 1.1593x -> 1.1478x, the worst unchanged (3.40x).
# Not taken: the same fit at fp8 and on the H100 and H200 (blocks 1.2-1.4x and 1.16-1.19x slower than the dense rate
# says) brings the cookbook's default launches' decodes closer and moves InferenceX's and aiconfigurator's (their
# launches set another MoE runner on Blackwell) and vLLM's H100 run further: the median 1.1593x -> 1.1696x.
# Then SGCF (the cookbook's GLM-4.7-Flash page: bf16 on one B200, SGLang 0.5.7, the same nine random runs as SGCR's;
# a glm4_moe_lite model read by the DeepSeek parser): all 45 numbers listed as not modelled (the launch's Triton MLA
# attention backend: its decode 1.7-2.5x slower than predicted, growing with the context); the headline unchanged.
# Then SGCGEM (the cookbook's Gemma 4 page: the 31B at TP2 and the 26B-A4B on H200, the gemma4 branch, text runs; a
# gemma4 family reading DiffusionGemma's backbone; 12 numbers scored, 1.00-1.61x, nothing fitted): 534 -> 546 numbers,
# the median and the worst unchanged (1.1478x, 3.40x).
# Then GPUStack's Qwen3-14B, Qwen3-32B and Qwen3-235B-A22B H100 pages (GPS, the same lab's DeepSeek-R1 workloads, 20
# runs, 60 numbers, nothing fitted): 546 -> 606 numbers, the median 1.1478x -> 1.1567x, the worst 3.40x -> 4.27x (the
# 14B's 1,000-prompt 128 / 4 burst on SGLang, its mean TPOT 928 ms measured against 217 ms: SGLang runs waiting
# prefills before the running decodes, the simulation runs them beside each prefill budget, stacks/sglang.yaml
# prefill_chunk_tokens), numbers over 2x 7 -> 11. New evidence, not a change in the model: recorded as it stands.
# Then SGLang as its code runs it (nothing fitted): prefills before the decodes (stacks/sglang.yaml prefill_first: its
# scheduler's get_next_batch_to_run) and its own running limit, 2048 in place of the 256 it had by default (the
# request pool's floor in its model runner): the median 1.1567x -> 1.1492x, the worst 4.27x -> 3.49x (GPS's 235B FP8
# TP4 burst on vLLM, its TPOT pessimistic), GPS's 14B SGLang burst TPOT 4.27x -> 1.48x (625 ms predicted against 928;
# its throughput stays 2.00x optimistic), SGCV's 8k MI300X median TTFT at 16 in flight 3.40x -> 3.16x; GPUStack's 14B
# SGLang runs at 32k-2k prompts, whose TPOTs the decodes beside each budget had met (1.04-1.21x), now 1.42-1.80x
# optimistic with their throughput and TTFTs (memory holds about 11 of the 32k requests: they run in waves, each
# wave's decodes waiting for its prefills). Numbers over 2x 11 -> 11. Then slow_kernels refitted as its source says,
# on SGCM2's loaded runs now simulated with the prefills first (in source): 0.65 -> 0.31 us a layer a token, 242.5 ->
# 242.85 us a layer; the median unchanged (1.1492x), the worst 3.49x -> 3.86x (SGCV's 8k median TTFT at 16 in flight,
# 3.16x -> 3.86x: its 8,000-token prefills now cheaper), InferenceX's MI325X 8k/1k throughput 1.19-1.43x -> 1.02-1.35x
# pessimistic, SGCV's loaded throughput 1.04-1.40x -> 1.05-1.46x optimistic. Numbers over 2x 11, unchanged.
# Then GPUStack's A100 pages (GPS, the same workloads' vLLM baselines: Qwen3-14B and Qwen3-32B on one A100, Qwen3-235B-A22B
# bf16 at TP8; 12 runs, 36 numbers, nothing fitted): 606 -> 642 numbers, the median 1.1492x -> 1.1517x, the worst
# unchanged (3.86x); theirs 1.01-1.57x (the 235B's 32k TPOT, optimistic), numbers over 2x 11, unchanged.
# Then SGLang PR #13094's Llama-3.1-8B FP8 runs (SGP13094, 8 runs, 24 numbers; prefills eager and graphed), on which
# two numbers were fitted (in source): an eager prefill's dispatch measured on prefills (stacks/sglang.yaml
# prefill_eager: 292 us a layer from SGP13094, 346 more an MoE layer from PR #13081, 325 more an MLA layer from PR
# #12160, in place of the decode-measured 28 and the 965 that carried DeepSeek's MLA launches to every MoE model),
# and the first-token delay split by attention (323 us a layer fitted on SGP13094's one-request runs, DeepSeek's
# 820 kept for MLA layers): 642 -> 642 numbers, the median 1.1517x -> 1.1490x, the worst unchanged (3.86x, SGCV's,
# an MLA model's), numbers over 2x 11 -> 8 (SGCQ3's Qwen3-235B median TTFTs 2.03-2.31x -> 1.13-1.40x, GPS's Qwen3-8B
# SGLang 2.13x -> 1.83x; SGCL's 8k TTFT at 64 in flight 1.68x -> 2.13x and SGCM's B200 one 1.32x -> 2.02x
# optimistic, which the larger delay had masked). Then slow_kernels refitted as its source says on SGCM2's loaded
# runs (in source), now prefilled as prefill_eager says: 0.31 -> 0.55 us a layer a token, 242.85 -> 242.61 us a
# layer; the median 1.1490x -> 1.1477x, the worst 3.86x -> 3.49x (SGCV's 8k median TTFT at 16 in flight 3.86x ->
# 3.34x; the GPS 235B FP8 TP4 vLLM burst TPOT, 3.49x, is the worst now), InferenceX's MI325X 8k/1k throughput
# 1.02-1.35x -> 1.15-1.40x pessimistic; numbers over 2x 8, unchanged.
# Session 51: the GPS Qwen3-235B FP8 TP4 128-token burst read with its prompts in vLLM's prefix cache (its own
# numbers rule out a cold prefill: the point's note), 7 of 8 blocks a prompt: its mean TPOT 3.49x pessimistic ->
# 2.03x optimistic, its median TTFT 1.32x -> 1.01x, its throughput 1.56x -> 1.06x; the median 1.1477x -> 1.1470x,
# the worst 3.49x -> 3.34x (SGCV's 8k median TTFT at 16 in flight), numbers over 2x 8, unchanged.
RECORDED_OUT_OF_SOURCE_WORST = 3.34  # 3.338
BAND_MIN_NUMBERS = MIN_NUMBERS  # a stack's own error band needs this many out-of-source numbers (6)
BANDS = ROOT / "dlmcost" / "inputs" / "error_bands.json"
# The metrics that are a time to the first token: their errors make a band of their own (error_bands)
FIRST_TOKEN_METRICS = frozenset({"ttft_mean_s", "ttft_p50_s"})
# Stack numbers that only delay each request's first token (a wait that holds neither a server nor the GPU):
# a point they were fitted on is in source for its first-token metrics, not for its speed ones
FIRST_TOKEN_FIELDS = frozenset({"first_token_us_per_layer", "first_token_us_per_mla_layer"})
# What each published metric is in `dlmcost serve -f json`, and whether a larger value is faster.
METRICS = {
    "output_tokens_per_s": ("output tok/s", lambda p: p["output_tokens_per_s"], True),
    "ttft_mean_s": ("TTFT mean s", lambda p: p["ttfb_s"]["mean"], False),
    "e2e_mean_s": ("E2E mean s", lambda p: p["latency_s"]["mean"], False),
    "forward_ms": ("ms/forward", lambda p: 1000 * p["makespan_s"], False),
    # prompt + answer tokens / s (guidellm's "tokens/s total")
    "total_tokens_per_s": ("total tok/s", lambda p: p["total_tokens_per_s"], True),
    # the wall time of a closed batch of requests (a job's makespan)
    "makespan_s": ("makespan s", lambda p: p["makespan_s"], False),
    "e2e_p50_s": ("E2E p50 s", lambda p: p["latency_s"]["median"], False),
    "ttft_p50_s": ("TTFT p50 s", lambda p: p["ttfb_s"]["median"], False),
    # bench_serving's mean TPOT, (E2E - TTFT) / (answer - 1) per request: exact from the means where
    # every answer has the same length (answer tokens per request = output tok/s / requests/s)
    "tpot_mean_ms": ("TPOT mean ms", lambda p: 1000 * (p["latency_s"]["mean"] - p["ttfb_s"]["mean"])
                     / (p["output_tokens_per_s"] / p["requests_per_s"] - 1), False),
    # bench_serving's median TPOT: the median over requests of each one's (E2E - TTFT) / (answer - 1), its
    # mean time between tokens, which serve's inter-block gap is for every request (AR: a block is a token)
    "tpot_p50_ms": ("TPOT p50 ms", lambda p: 1000 * p["inter_block_s"]["median"], False),
}


def rows(data: Path = DATA) -> list[dict]:
    points, base = load_points(data)
    out = []
    for p in points:
        analysis, spec = analysis_for(p, base, stack=p.stack)
        roofline, _ = analysis_for(p, base, stack="none", spec=spec)
        out.append(dict(compare(p, analysis, roofline), point=p))
    return out


def summary(rs: list[dict]) -> dict:
    errors = [r["error"] for r in rs]
    roofline = [max(r["roofline_ms"] / r["measured_ms"], r["measured_ms"] / r["roofline_ms"]) for r in rs]
    ratios = [r["ratio"] for r in rs]
    out = [r["error"] for r in rs if not r["point"].in_sample]
    return dict(n=len(rs), median_error=statistics.median(errors), worst_error=max(errors),
                n_out=len(out), out_median_error=statistics.median(out), out_worst_error=max(out),
                median_ratio=statistics.median(ratios),
                roofline_median_error=statistics.median(roofline), roofline_worst_error=max(roofline),
                stacks=sorted({r["stack"] for r in rs}), gpus=sorted({r["gpu"] for r in rs}))


def serve_json(command: str) -> dict:
    """The one deployment and one load of a `dlmcost serve` command, as `-f json` prints them
    (run in-process from the repository root, where the commands' @files are)."""
    from dlmcost.cli.entry import main

    argv = shlex.split(command)
    assert argv[:2] == ["dlmcost", "serve"], command
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv[1:], "-f", "json"])
    assert code == 0, f"{command}: exit {code}: {err.getvalue()}"
    (deployment,) = json.loads(out.getvalue())["deployments"]
    (point,) = deployment["points"]
    point = dict(point, _stack=deployment["deployment"]["stack"], _gpu=deployment["deployment"]["gpu"])
    return point


def serving_rows(data: Path = SERVING) -> list[dict]:
    """One row per published metric of each serving point: measured, predicted, their ratio,
    the error max(pred/meas, meas/pred) and the speed ratio (above 1: the prediction is optimistic)."""
    out = []
    for p in load_yaml(data.read_text(encoding="utf-8"))["points"]:
        predicted = serve_json(" ".join(p["command"].split()))
        for metric, measured in p["measured"].items():
            label, read, faster_up = METRICS[metric]
            value = float(read(predicted))
            ratio = value / measured
            out.append(dict(id=p["id"], curve=p["curve"], concurrency=p["concurrency"], batch=p["batch"],
                            metric=metric, label=label, measured=float(measured), predicted=value, ratio=ratio,
                            error=max(ratio, 1 / ratio), optimism=ratio if faster_up else 1 / ratio,
                            in_sample=metric in _fitted_metrics(p), point=p,
                            stack=predicted["_stack"], gpu=predicted["_gpu"], tail=mean_beside_median(metric, p)))
    return out


def mean_beside_median(metric: str, point: dict) -> bool:
    """Whether a row is a mean time to the first token of a run that also published its median: listed,
    not scored (the median is). A mean over a run's few requests is set by its slowest ones: the first
    requests after a server's launch (SGCM2's one-request run: mean 4,529 ms, median 385 ms, one request
    of 38 s) and a first wave whose prompts no cache held, which the published runs do not say. The
    median is the typical request's, which the simulation describes; the mean stays on the page."""
    return metric == "ttft_mean_s" and "ttft_p50_s" in point["measured"]


# --- which numbers were fitted on which source ----------------------------------------------------
#
# A stack or hardware file's `fitted:` names the validation points each fitted number was set on
# (published ids; `serving:` + id for points under load). A point is *in source* when a number its
# prediction reads (its stack's and its GPU's fitted numbers) was fitted on a point of its own
# publication (`origin`): it shares the setup, the harness and the author's choices that the fit
# absorbed. A point that set a number, or an assumption of other points (`leans_on`: the tokens per
# forward a source does not publish, fitted at a curve's lowest load), is in sample. The headline
# error is taken on the other points only: those leaning on an assumption fitted on a sibling point
# test how the model scales with the load from there.


def origins() -> dict[str, str]:
    """Every validation point's id (serving ones as `serving:ID`) -> its publication key."""
    points, _ = load_points(DATA)
    out = {p.id: p.origin for p in points}
    for q in load_yaml(SERVING.read_text(encoding="utf-8"))["points"]:
        out[f"serving:{q['id']}"] = q["origin"]
    return out


def point_ids(named: list[str], ids: list[str]) -> list[str]:
    """The point ids a `fitted` list names: each id as written, or for one ending in "*" every id of
    `ids` that begins with the rest (none matching is left as written, for the checks to report)."""
    out = []
    for pid in named:
        matches = [i for i in ids if i.startswith(pid[:-1])] if pid.endswith("*") else []
        out += matches or [pid]
    return out


def fitted_numbers() -> list[dict]:
    """Every fitted number of the bundled stacks and accelerators: its file, field and points."""
    from dlmcost.inputs.hardware import HardwareDB
    from dlmcost.inputs.stacks import bundled_stack_names, load_stack

    ids = list(origins())
    out = [dict(kind="stack", name=n, field=f, points=point_ids(list(ps), ids))
           for n in bundled_stack_names() for f, ps in load_stack(n).fitted.items()]
    out += [dict(kind="gpu", name=g.name, field=f, points=point_ids(list(ps), ids))
            for g in HardwareDB.load().gpus.values() for f, ps in g.fitted.items()]
    return out


def fit_origins(stack: str, gpu: str, numbers: list[dict], where: dict[str, str]) -> set[str]:
    """The publications whose points set a number a prediction reads: an eagerly run stack's
    (`NAME (eager)`) numbers are its stack's, its `eager` dispatch among them; a stack run with
    CUDA graphs does not read that one."""
    eager = stack.endswith(EAGER_SUFFIX)
    name = stack[:-len(EAGER_SUFFIX)] if eager else stack
    used = [n for n in numbers if (n["kind"], n["name"]) in (("stack", name), ("gpu", gpu))
            and (eager or n["kind"] != "stack" or n["field"] != "eager")]
    return {where[pid] for n in used for pid in n["points"]}


def speed_numbers(numbers: list[dict]) -> list[dict]:
    """The fitted numbers a prediction of a speed metric (not a first token's) reads: all but the stack
    numbers that only delay each request's first token (FIRST_TOKEN_FIELDS)."""
    return [n for n in numbers if not (n["kind"] == "stack" and n["field"] in FIRST_TOKEN_FIELDS)]


def fitting_points(numbers: list[dict]) -> set[str]:
    """The points that set a number, another point's assumption or one of their own (a `fitted`
    note): in sample, whatever their source."""
    points, _ = load_points(DATA)
    serving = load_yaml(SERVING.read_text(encoding="utf-8"))["points"]
    leaned = {pid for p in points for pid in p.leans_on} | {pid for q in serving for pid in q.get("leans_on", [])}
    own = {p.id for p in points if p.in_sample} | {f"serving:{q['id']}" for q in serving if q.get("fitted")}
    return {pid for n in numbers for pid in n["points"]} | leaned | own


def mark_sources(rs: list[dict], serving: list[dict]) -> None:
    """Sets each row's `origin` and `in_source` (see above; a point that set a number is in source)."""
    numbers, where = fitted_numbers(), origins()
    fitters = fitting_points(numbers)
    for r in rs:
        p = r["point"]
        r["origin"] = p.origin
        r["in_source"] = p.id in fitters or p.origin in fit_origins(r["stack"], r["gpu"], numbers, where)
    speed = speed_numbers(numbers)
    speed_fitters = fitting_points(speed)
    for r in serving:
        p = r["point"]
        read, setters = (numbers, fitters) if r["metric"] in FIRST_TOKEN_METRICS else (speed, speed_fitters)
        r["origin"] = p["origin"]
        r["in_source"] = (f"serving:{p['id']}" in setters
                          or p["origin"] in fit_origins(r["stack"], r["gpu"], read, where))
        r["not_modelled"] = p.get("not_modelled")


def scored(r: dict) -> bool:
    """Whether a row counts in the headline: out of source, in a configuration a stack describes."""
    return not r["in_source"] and not r.get("not_modelled") and not r.get("tail")


def headline(rs: list[dict], serving: list[dict]) -> dict:
    """The out-of-source error over every number (single-stream times and serving metrics)."""
    errors = [r["error"] for r in (*rs, *serving) if scored(r)]
    n_in = sum(r["in_source"] for r in (*rs, *serving))
    n_not_modelled = sum(bool(r.get("not_modelled")) and not r["in_source"] for r in serving)
    tails = [r["error"] for r in serving if r.get("tail") and not r["in_source"] and not r.get("not_modelled")]
    med, worst = statistics.median(errors), max(errors)
    return dict(n=len(errors), n_in_source=n_in, n_not_modelled=n_not_modelled, median_error=med, worst_error=worst,
                n_tail=len(tails), tail_median_error=statistics.median(tails) if tails else None,
                tail_worst_error=max(tails) if tails else None,
                origins=sorted({r["origin"] for r in (*rs, *serving) if scored(r)}),
                median_met=med <= TARGET_OUT_OF_SOURCE_MEDIAN, worst_met=worst <= TARGET_OUT_OF_SOURCE_WORST)


def without_each_publication(rs: list[dict], serving: list[dict]) -> list[tuple[str, int, float, float]]:
    """(publication, its numbers, the headline's median and worst error without them) for each
    publication the headline takes numbers from: how much the figure rests on any one source."""
    scored_rows = [r for r in (*rs, *serving) if scored(r)]
    out = []
    for origin in sorted({r["origin"] for r in scored_rows}):
        rest = [r["error"] for r in scored_rows if r["origin"] != origin]
        out.append((origin, len(scored_rows) - len(rest), statistics.median(rest), max(rest)))
    return out


def speed_ratio(r: dict) -> float:
    """Predicted speed / measured speed (above 1: optimistic), for a single-stream or serving row."""
    return r["optimism"] if "optimism" in r else r["measured_ms"] / r["predicted_ms"]


def first_token(r: dict) -> bool:
    """Whether a row's metric is a time to the first token (it gets the first-token band)."""
    return r.get("metric") in FIRST_TOKEN_METRICS


def vendor_of(gpu: str) -> str:
    """The vendor of a validation row's GPU (its hardware file's id or name), as the hardware files
    spell it."""
    return _vendors()[gpu.lower()]


@functools.cache
def _vendors() -> dict[str, str]:
    from dlmcost.inputs.hardware import HardwareDB

    return {key.lower(): g.vendor for gid, g in HardwareDB.load().gpus.items() for key in (g.name, gid)}


def error_bands(rs: list[dict], serving: list[dict]) -> dict:
    """Per stack, the 10th, 50th and 90th percentiles of predicted / measured speed over its
    out-of-source numbers, in two bands: speed (throughputs, end-to-end times, times per pass:
    what the step times set) and first token (the times to the first token, which a fixed
    per-request cost no step time describes can move alone). A stack with fewer than
    BAND_MIN_NUMBERS speed numbers takes the pooled speed band. Its first-token band is its own
    first-token numbers' with enough of them, else every stack's first-token numbers' with enough,
    else its band over all its numbers, first-token ones included (else the pooled one of those).

    Where more than one vendor's parts have BAND_MIN_NUMBERS speed numbers (every stack's), each
    stack also has a band on each such vendor's parts (`vendors`): the same engine runs other kernels
    on another runtime there (CUDA, ROCm), so one vendor's errors say little about another's. It is
    the stack's own numbers on that vendor's parts with enough of them, else every stack's there,
    else its band on every vendor's parts; its first-token band likewise. A vendor without enough
    numbers (or none) takes the stack's band on every vendor's parts."""
    import numpy as np

    speed: dict[str, list[float]] = {}
    first: dict[str, list[float]] = {}
    by_vendor: dict[tuple[str, str, bool], list[float]] = {}  # (stack, vendor, first token) -> ratios
    origins_of: dict[tuple[str, bool], set[str]] = {}  # the publications a band's numbers come from
    vendor_origins: dict[tuple[str, str, bool], set[str]] = {}
    from dlmcost.inputs.stacks import bundled_base, bundled_stack_names, load_stack

    # a stack that extends another (sglang-pcg: sglang with graphed prefills) is the same engine
    # with a setting changed: its numbers count in its base's band, which it takes
    base = {name: bundled_base(name) for name in bundled_stack_names()}
    for r in (*rs, *serving):
        if scored(r):
            stack = base.get(r["stack"], r["stack"])
            (first if first_token(r) else speed).setdefault(stack, []).append(speed_ratio(r))
            origins_of.setdefault((stack, first_token(r)), set()).add(r["origin"])
            key = (stack, vendor_of(r["gpu"]), first_token(r))
            by_vendor.setdefault(key, []).append(speed_ratio(r))
            vendor_origins.setdefault(key, set()).add(r["origin"])

    def band(values: list[float], basis: str) -> dict:
        lo, mid, hi = np.percentile(values, [10, 50, 90])
        return dict(low=round(float(lo), 4), median=round(float(mid), 4), high=round(float(hi), 4),
                    numbers=len(values), basis=basis)

    def publications(stack: str, *first_token: bool) -> str:
        pubs = len(set().union(*(origins_of.get((stack, f), set()) for f in first_token)))
        return f"from {pubs} publication{'' if pubs == 1 else 's'}"

    def few(n: int, what: str) -> str:
        return f"{n} {what} number{'' if n == 1 else 's'} of its own (fewer than {BAND_MIN_NUMBERS})"

    def on_vendor(stacks: set[str], vendor: str, first_token: bool) -> tuple[list[float], str]:
        """These stacks' ratios on one vendor's parts, and how many publications they come from."""
        keys = [(s, vendor, first_token) for s in stacks]
        pubs = len(set().union(*(vendor_origins.get(k, set()) for k in keys)))
        return [x for k in keys for x in by_vendor.get(k, [])], f"from {pubs} publication{'' if pubs == 1 else 's'}"

    def vendor_entry(stack: str | None, vendor: str, entry: dict) -> dict:
        """The band on one vendor's parts: the stack's own numbers there with enough of them, else
        every stack's there, else the stack's band on every vendor's parts (`entry`); the same for
        its first-token band."""
        every = set(speed) | set(first)
        own_speed, own_pubs = on_vendor({stack} if stack else every, vendor, False)
        all_speed, all_pubs = on_vendor(every, vendor, False)
        own_first, own_first_pubs = on_vendor({stack} if stack else every, vendor, True)
        all_first, all_first_pubs = on_vendor(every, vendor, True)
        whose = "its own" if stack else "every stack's"
        if len(own_speed) >= BAND_MIN_NUMBERS:
            out = band(own_speed, f"{whose} out-of-source speed numbers on {vendor} parts, {own_pubs}")
        elif len(all_speed) >= BAND_MIN_NUMBERS:
            out = band(all_speed, f"every stack's out-of-source speed numbers on {vendor} parts, {all_pubs} "
                                  f"({len(own_speed)} of its own, fewer than {BAND_MIN_NUMBERS})")
        else:
            out = {k: v for k, v in entry.items() if k not in ("first_token", "vendors")}
        if len(own_first) >= BAND_MIN_NUMBERS:
            out["first_token"] = band(own_first, f"{whose} out-of-source first-token numbers on {vendor} parts, "
                                                 f"{own_first_pubs}")
        elif len(all_first) >= BAND_MIN_NUMBERS:
            out["first_token"] = band(all_first, f"every stack's out-of-source first-token numbers on {vendor} "
                                                 f"parts, {all_first_pubs} ({len(own_first)} of its own, fewer than "
                                                 f"{BAND_MIN_NUMBERS})")
        else:
            out["first_token"] = entry["first_token"]
        return dict(out, vendor=vendor)

    pooled_speed = [v for vs in speed.values() for v in vs]
    pooled_first = [v for vs in first.values() for v in vs]
    pooled_all = pooled_speed + pooled_first
    pooled = band(pooled_speed, "every stack's out-of-source speed numbers")
    too_few = f"too few first-token numbers for a band apart ({BAND_MIN_NUMBERS} needed)"
    pooled_first_band = (band(pooled_first, "every stack's out-of-source first-token numbers")
                         if len(pooled_first) >= BAND_MIN_NUMBERS else
                         band(pooled_all, f"every stack's out-of-source numbers: {too_few}, {len(pooled_first)} in all"))
    out = {"pooled": dict(pooled, first_token=pooled_first_band)}
    # the vendors whose parts have a band of their own: those with enough speed numbers of every stack's
    measured = sorted({v for (_, v, f) in by_vendor if not f
                       and len(on_vendor(set(speed), v, False)[0]) >= BAND_MIN_NUMBERS})
    if len(measured) > 1:
        out["pooled"]["vendors"] = {v.lower(): vendor_entry(None, v, out["pooled"]) for v in measured}
    for name in bundled_stack_names():
        if base[name] != name:
            continue  # (below: its base's band)
        own_speed, own_first = speed.get(name, []), first.get(name, [])
        entry = (band(own_speed, f"its own out-of-source speed numbers, {publications(name, False)}")
                 if len(own_speed) >= BAND_MIN_NUMBERS else
                 dict(pooled, basis=f"pooled: {few(len(own_speed), 'out-of-source speed')}"))
        together = own_speed + own_first
        if len(own_first) >= BAND_MIN_NUMBERS:
            entry["first_token"] = band(own_first, f"its own out-of-source first-token numbers, "
                                                   f"{publications(name, True)}")
        elif len(pooled_first) >= BAND_MIN_NUMBERS:
            entry["first_token"] = dict(pooled_first_band, basis="pooled: " + few(len(own_first), "first-token"))
        elif len(together) >= BAND_MIN_NUMBERS and own_first:
            entry["first_token"] = band(together, f"all its out-of-source numbers, {publications(name, False, True)}: "
                                                  f"{too_few}, {len(own_first)} of its own, {len(pooled_first)} in all")
        elif len(together) >= BAND_MIN_NUMBERS:
            entry["first_token"] = dict(entry, basis=f"its speed band: no first-token numbers of its own "
                                                     f"({len(pooled_first)} in all)")
        else:
            entry["first_token"] = dict(pooled_first_band, basis="pooled, first-token ones included: "
                                        + few(len(together), "out-of-source"))
        runs_on = [v for v in measured if load_stack(name).runs(v)]  # a stack's band on the parts it runs on
        if len(measured) > 1 and runs_on:
            entry["vendors"] = {v.lower(): vendor_entry(name, v, entry) for v in runs_on}
        out[name] = entry
    for name in bundled_stack_names():
        if base[name] != name:
            out[name] = dict(out[base[name]], basis=f"{base[name]}'s band, which it extends (its numbers "
                                                    f"counted there): {out[base[name]]['basis']}")
    return out


def _fitted_metrics(p: dict) -> set[str]:
    """The metrics a point set a number with (named first in its `fitted` note)."""
    note = p.get("fitted") or ""
    return {m for m in METRICS if note.startswith(m)} or (set(p["measured"]) if note else set())


def serving_summary(rs: list[dict]) -> dict:
    def stats(sel):
        errors = [r["error"] for r in sel]
        return (len(errors), statistics.median(errors), max(errors)) if errors else (0, None, None)

    # a run of what dlmcost does not model (another engine release, say) is listed, not counted
    # and a mean first token whose run published the median too is listed beside it, the median counted
    modelled = [r for r in rs if not r.get("not_modelled") and not r.get("tail")]
    heavy = [r for r in modelled if r["concurrency"] >= 8]
    big = [r for r in modelled if r["batch"] >= 32]
    n, med, worst = stats(modelled)
    n_out, out_med, out_worst = stats([r for r in modelled if not r["in_sample"]])
    n_heavy, heavy_med, heavy_worst = stats(heavy)
    optimism = max(r["optimism"] for r in big)
    curves = {}
    for r in modelled:
        if r["metric"] in ("output_tokens_per_s", "forward_ms"):
            curves.setdefault(r["curve"], set()).add(r["concurrency"])
    return dict(n=n, points=len({r["id"] for r in modelled}), n_not_modelled=sum(bool(r.get("not_modelled")) for r in rs),
                n_tail=sum(bool(r.get("tail")) and not r.get("not_modelled") for r in rs), median_error=med, worst_error=worst, n_out=n_out,
                out_median_error=out_med, out_worst_error=out_worst, n_heavy=n_heavy, heavy_median_error=heavy_med,
                heavy_worst_error=heavy_worst, n_big=len(big), big_optimism=optimism,
                curves={c: sorted(v) for c, v in curves.items()},
                median_met=heavy_med <= TARGET_MEDIAN, worst_met=heavy_worst <= TARGET_WORST,
                optimism_met=optimism <= TARGET_OPTIMISM)


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def render_serving(rs: list[dict]) -> list[str]:
    s = serving_summary(rs)
    met = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    curves = "; ".join(f"{c} (concurrency {', '.join(map(str, v))})" for c, v in s["curves"].items() if len(v) > 1)
    lines = [
        "## Serving under load: `dlmcost serve` against published benchmarks",
        "",
        f"{s['points']} published deployments under load ({s['n']} numbers) from `validation/serving.yaml`, each",
        "predicted by the `dlmcost serve` command listed under it (one deployment, one load; run with `-f json`);",
        f"{s['n_not_modelled']} more numbers, from runs of what dlmcost does not model, are listed *(not modelled)*",
        f"with what differs, and {s['n_tail']} mean times to the first token of runs that also publish the median",
        "are listed *(mean: median scored)*: both left out of every figure below.",
        "A client that keeps c requests in flight over N requests is `--job N --parallel c` (SGLang's",
        "`bench_serving --max-concurrency c --num-prompts N --request-rate inf`); a forward pass at batch B is",
        "a job of B one-pass requests. Ratio = predicted / measured; error = max(ratio, 1 / ratio); *optimistic*:",
        "the prediction is faster than the measurement (more tokens/s, less time).",
        f"Throughput against concurrency: {curves}.",
        "",
        f"- **All {s['n']} numbers: median error {s['median_error']:.2f}x, worst {s['worst_error']:.2f}x.** "
        f"Out of sample ({s['n_out']} not marked *in-sample*): median {s['out_median_error']:.2f}x, "
        f"worst {s['out_worst_error']:.2f}x.",
        f"- At concurrency >= 8 ({s['n_heavy']} numbers): median error {s['heavy_median_error']:.2f}x "
        f"(target <= {TARGET_MEDIAN}x: {met(s['median_met'])}), worst {s['heavy_worst_error']:.2f}x "
        f"(target <= {TARGET_WORST:g}x: {met(s['worst_met'])}).",
        f"- At a batch of >= 32 running requests ({s['n_big']} numbers): at most {s['big_optimism']:.2f}x optimistic "
        f"(target <= {TARGET_OPTIMISM}x: {met(s['optimism_met'])}).",
        "",
        "*In-sample* numbers set a value the prediction uses (the point's `fitted` note says which); the others",
        "are out of sample (one sets a behaviour rather than a number: the sglang-dllm stack's",
        "`first_block_outside_limit`). An in-sample number need not be met exactly: the jax-tpu stack's two step costs were",
        "fitted by hand to the decode step alone, without the prefill and the growing context the simulation adds.",
        "The stacks' per-step host terms are described in [stacks.md](stacks.md).",
        "",
        "| point | from | c | batch | metric | measured | predicted | ratio | error | |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rs:
        tag = (" *(in-sample)*" if r["in_sample"] else " *(in source)*" if r.get("in_source")
               else " *(not modelled)*" if r.get("not_modelled") else " *(mean: median scored)*" if r.get("tail")
               else "")
        side = "" if r["error"] < 1.005 else "optimistic" if r["optimism"] > 1 else "pessimistic"
        lines.append(f"| {r['id']}{tag} | {r.get('origin', '')} | {r['concurrency']} | {r['batch']} | {r['label']} | {_fmt(r['measured'])} | "
                     f"{_fmt(r['predicted'])} | {r['ratio']:.2f} | {r['error']:.2f}x | {side} |")
    lines += ["", "Why the largest errors are there:", "", *SERVING_NOTES, "", "### Serving sources and commands", ""]
    seen = set()
    for r in rs:
        p = r["point"]
        if p["id"] in seen:
            continue
        seen.add(p["id"])
        fitted = f" Fitted: {p['fitted']}." if p.get("fitted") else " Out of sample."
        differs = f" Not modelled: {p['not_modelled']}." if p.get("not_modelled") else ""
        lines.append(f"- **{p['id']}**: {p['source']}.{fitted}{differs} Assumes: {' '.join(p['assumes'].split())}. "
                     f"`{' '.join(p['command'].split())}`")
    lines += ["", "Source keys: see the header of `validation/serving.yaml` (SGC = SGLang cookbook, LLaDA 2.1 page, "
              "section 5.1; SGCL = the same cookbook's Llama 3.1 page, section 5.1; FLX = JasperTan-03/flux-serve `simulator/config.py`; SGJ = sgl-project/sglang-jax PR #1632)."]
    return lines


# One or two sentences per far-off group (the simulator and the engine are not tuned to them).
SERVING_NOTES = [
    "- SGLang at concurrency 100 (1.07-1.20x pessimistic): the measured decode time per token is the same at both loads "
    "(E2E - TTFT over the answer: about 1.98 ms at concurrency 1, 1.96 ms at 100), yet the 500 requests finish every "
    "935 ms (the mini; 1,344 ms the flash) while each decodes for 992 ms (1,649 ms) after its first token. The "
    "sglang-dllm stack's `first_block_outside_limit` runs the next request's prefill and first block beside the "
    "running one's last passes; the published overlap is about 210 ms (540 ms), and SGLang runs a round of "
    "prefill or of decode, never both, so how it overlaps them is not identified. The simulated overlap shares "
    "batch-2 passes, which slow the running request: the predicted decode after the first token is 1.98 ms per "
    "token at concurrency 100 (mini) against 1.88 ms at 1, where the measurement stays at 1.96-1.98 ms.",
    "- SGLang's TTFT at concurrency 1 (1.29x and 1.36x pessimistic): the stack's `prompt_prefill: block-chunks` "
    "prefills the prompt one 32-token block per forward, as SGLang's dLLM scheduler does (about 20 passes for the mean "
    "610-token prompt); the tokens per forward fitted on the mini at concurrency 1 (3.37) then leaves the decode after the "
    "first token 7% faster (mini) and 3% slower (flash) than the measured one. With one prefill pass the first block came "
    "1.8-1.9x too early.",
    "- FluxServe: the A100 40GB PCIe's `sustained_compute` (0.65 of its GEMM efficiency, fitted at batch 32: 1-4k "
    "rows of eager LLaDA run at about 163 TF/s, 52% of peak, on the 250 W part) brings batches 2-16 within 1.1x "
    "out of sample; batch 1 is 1.31x optimistic, where the eager per-forward host time and the GEMM curve at 128 "
    "rows (read at 474 with the A100's rows scale, fitted on SXM forwards of 512 and 2,048 rows), not the sustained "
    "clock, set the pass. The value is fitted, not a clock measurement: no published sustained-clock figure for "
    "this part was found.",
    "- The vLLM dLLM plugin (VPLUG; its worst out-of-source number 1.76x). Its eager run after its coherence fixes "
    "(2.22x optimistic at one request, 1.51x at 8 running) takes about 1.6 s a 32-token block, 50 ms a pass by the "
    "report's own count of about 32 passes a block, where the stack's eager pass is 22 ms (the MoE's expert weights "
    "read at the A100's bandwidth, plus vLLM's eager launches); fewer passes a block would each take longer, so no "
    "tokens per forward closes the gap. The per-request rate is the same at 8 running (7.5x the throughput), so the "
    "missing time is per pass, not per request: host work the plugin runs eagerly around each pass (its known "
    "limitations name a GPU-to-CPU sync per step and tensors built from Python lists), which no stack number "
    "describes. Its TP2 run (2.27x optimistic) is slower than its TP1 run: time to first token 507 ms against 17 ms "
    "and inter-token latency 4.3 ms against 4.0 ms, where halving each GPU's weight reads predicts a pass of 11.8 ms "
    "against 20.7 ms; the report puts it down to TP communication, which the stack's all-reduces at these message "
    "sizes put at about 0.5 ms a pass. Fitting either would take a number from the source it is scored on.",
    "- InferenceX's DeepSeek-R1 on 8x H200 (IFX; SGLang, AR): throughput and mean E2E are within 1.11x "
    "pessimistic at every load (8-64 in flight; 1.22-1.34x before the H200's fp8 GEMMs took their measured rate, 0.71 of peak and "
    "5.6 us a kernel with the activation's quantisation, from the generic 0.8 and 3 us, and a fused MoE block its six "
    "kernels), and the mean TTFT 1.61x optimistic at 8, "
    "1.64x at 16, 1.51x at 32 and 1.30x at 64 (206 ms predicted against 331 ms measured at 8), each prefill waiting "
    "59.6 ms for SGLang's eager dispatch of DeepSeek-R1's 61 latent-attention layers (58 MoE) and 123 all-reduces (the "
    "sglang stack's prefill_eager: 292 + 325 us a layer, 346 more an MoE layer, 15 us an all-reduce), its prefills "
    "replaying no CUDA graph, and each first token the sglang stack's 50.0 ms first-token delay (820 us a "
    "latent-attention layer, fitted on SGCR's one-request median first tokens; 2.45x, 2.24x, 2.11x and 1.69x without it; "
    "3.14x, 2.70x, 2.38x and 1.81x with the older 650 us per MoE layer; 5.16x, 3.93x, 3.08x and 2.23x "
    "before the eager prefill; 4.01x, 2.80x, 1.93x "
    "and 1.45x while every request of a length class ran its class's passes, so that the closed loop's completions "
    "came in waves and the refills' prefills queued behind each other), with the launch's prompt budget of 32,768 tokens a step "
    "(--chunked-prefill-size; the points ran at the stack's 8,192 until this was seen: 3.74x, 3.41x and 2.41x at 16-64, "
    "each wave of prompts cut into more steps). SGLang streams the first token at once even with --stream-interval 10, "
    "so the TTFT is a first token's. The published P99 TTFT (2.0-2.7 s against means of 0.33-0.42 s) says a few "
    "requests wait seconds for their first token, which no stack term describes; which requests, and why, the "
    "issue does not say. The missing time is not in the prefill's kernels: from aiconfigurator's measured H200 "
    "tables (systems/data/h200_sxm: fp8 block-scaled GEMMs, SGLang's context MLA, fused MoE and all-reduce) a "
    "920-token prefill takes 59 ms, against the model's 53 ms for the same ops. The same sweep two SGLang releases "
    "later (AICS, below: the same harness, lengths and launch) is early too, 1.19-1.40x at 4-64 in flight, so the gap "
    "is not this run's.",
    "- NVIDIA aiconfigurator's measured SGLang runs of DeepSeek-R1 FP8 on 8x H200 (AICS; SGLang 0.5.9, "
    "InferenceX's sweep of 2026-03-25, 30 numbers, 1.18x median, 1.60x worst): the mean TPOT is 1.01-1.19x "
    "pessimistic at every length and load (1.01-1.02x at 4 in flight, 1.08-1.19x at 8-64, the most with 8,192-token "
    "prompts, whose decodes read the longest K/V). The mean TTFT, with the sglang stack's first-token delay (50.0 ms "
    "for DeepSeek's 61 latent-attention layers, fitted on SGCR's one-request median first tokens on B200), is 1.40x, 1.19x, 1.32x, 1.20x and 1.29x "
    "optimistic at 4-64 in flight with 1,024-token prompts (185-325 ms predicted, 245-419 ms measured), 1.23-1.44x "
    "with 8,192-token answers, 1.05x pessimistic at 4 in flight and 1.09x at 8 with 8,192-token prompts, 1.03x and "
    "1.11x optimistic at 16 and 32 and 1.60x at 64 (1.43 s against 2.28 s). Without the delay the measured first "
    "token came 106-174 ms after the model's with the short prompts at every load and 31-35 ms after with the long "
    "ones at 4 and 8 in flight, a cost not growing with the prompt; the delay's 50 ms puts the long prompts' first "
    "tokens at 4 and 8 in flight 22-43 ms after the measured and leaves the short prompts' 39-104 ms late, a per-request cost larger here than on SGCR's B200 "
    "runs, beyond what the fitted delay describes (IFX's TTFTs, the same deployment two releases earlier, miss by as much). "
    "Nor is it SGLang's alone: the same "
    "corpus's TensorRT-LLM runs of DeepSeek-R1 FP8 on 8x H200 TP8 in the same harness (measured 2025-11-02, 1k / 1k) "
    "take 308, 293 and 380 ms to the first token at 4, 8 and 16 in flight (TPOT 13.8-20.4 ms), and its SGLang runs "
    "of Qwen3.5-397B and GLM-5 on H200 TP8 233-348 ms, where its vLLM runs of MiniMax-M2.5 (below) take 84-131 ms at 4-16 in flight; "
    "aiconfigurator itself models SGLang's and TensorRT-LLM's TTFT as 1.85-4 times the prefill (a fixed factor, "
    "sdk/backends/base_backend.py _ttft_queuing_factor), a correction no kernel time carries. At 64 requests of 8,192-token prompts the measured TTFT grows to 2.3 s "
    "where the model, queueing the refills' prefills, has 1.43 s. Nothing was fitted on these points. The same run's "
    "B200 deployment (config 87: TP8, an FP8 K/V cache, running limit 128, 22 numbers) is met as well on TPOT "
    "(1.01-1.13x) and on TTFT 1.02x pessimistic to 1.57x optimistic (the measured first token 4 ms before to 150 ms "
    "after the model's at 4-8 in flight, 7 ms before to 290 ms after at 16-64; 1.17-1.72x optimistic without the delay). Its launch sets --scheduler-recv-interval (10 below 16 in flight, 30 from 16): while "
    "only decodes run SGLang takes in new requests once every R iterations, so an arrival waits up to R decode "
    "steps unseen. Without it (serve's --recv-interval) the 1k / 1k TTFTs at 16-64 would be 4.6-5.7x optimistic (at the older 650 us per MoE layer). "
    "Its TP4 runs of 8k / 1k (at --mem-fraction-static 0.95, which serve's --mem-fraction expresses: at 0.9 only 14 "
    "of the 32 requests would fit) are met on TPOT (1.05-1.11x) and 1.52-1.63x early on TTFT (1.72-1.74x without the delay). On B200 the "
    "prefill's kernels are 1.24-1.63x slower in aiconfigurator's measured SGLang 0.5.9 tables (systems/data/"
    "b200_sxm: fp8 block-scaled GEMMs, context MLA, Triton fused MoE, all-reduce) than the model had them before "
    "its Blackwell fp8 GEMMs took the rate ratio those tables measure, which closes part of the gap (a 1k "
    "prompt's TP8 prefill 57.6 ms against 35.4 ms for the same ops; 8k: 182 against 140), the narrow fp8 GEMMs "
    "and the fused MoE most; but the launch runs other kernels (FlashInfer GEMMs, the flashinfer_trtllm MoE "
    "runner, 1.18-1.24x off where tabled), and at the tables' rates the first tokens would still have come 1.6-1.9x "
    "early without the first-token delay (before the prefills ran first): the kernels are a sixth to a quarter of that miss, which grows with the prompt far faster than they do. "
    "The corpus' B300 rows of the same launch (SGLang 0.5.10, 2026-04-17) are not scored: on that release the "
    "harness' client tokenizer disagreed with the server's and sent prompts about five times longer than asked "
    "(InferenceX PRs #937 and #1381), so their first tokens come 1.6-4.3x later than B200's and the model at the "
    "asked lengths was 2.9-9.4x optimistic on TTFT, 1.7-2.2x with prompts five times longer, before the prefills ran first.",
    "- The same corpus's vLLM runs of MiniMax-M2.5 FP8 in the same harness (AICS; InferenceX's "
    "minimaxm2.5-fp8 sweeps: 8x H200 TP8 EP8 on vLLM 0.18.0 at 4-128 in flight, 4x H200 TP4 on 0.16.0 and 4x H100 "
    "TP4 EP4 on 0.18.0 at 4-64; 1k/1k, 1k/8k and 8k/1k; 48 points; and B200, below). Their TPOTs are out of source: 0.79-1.09x of "
    "the measured on H200 TP8 (1.05x median error; 0.99-1.09x up to 32 in flight, 0.91-1.04x at 64 and 0.79-0.94x "
    "at 128, where the measured decode slows more than the model's), 0.82-1.19x on H100 TP4 EP4, and 0.65-0.96x "
    "on H200 TP4 without expert parallelism (8.0 ms predicted against 12.4 ms measured at 4 in flight: the model has "
    "that deployment as fast as TP8 EP8, whose measured 8.0 ms on 0.18.0 it meets; whether vLLM 0.16's kernels or "
    "the experts' 384-wide TP4 slices make the difference is not separated). Their TTFTs are "
    "in source: the vllm stack's first-token delay (0.8 ms a layer, 49.6 ms for MiniMax's 62) is aiconfigurator's fit "
    "over this corpus, these rows among its vLLM runs. They answer whether the harness adds first-token time: "
    "without the delay the model's first token with 1,024-token prompts on H200 TP8 is 31-38 ms at 4-8 in flight "
    "against 106-114 ms measured, 71-82 ms later in 9 of the 12 cells from 4 to 128 in flight (34, 28 and 46 ms in "
    "the others), 48-78 ms "
    "on H200 TP4 and 27-47 ms on H100 TP4: a per-request first-token cost the model's prefill lacks, constant with "
    "the load, as on SGLang's DeepSeek-R1 rows in this harness (106-174 ms there without the sglang stack's delay), about half as large. With the "
    "delay the H200 TP8 TTFTs are 1.21-1.43x optimistic at 4-32 in flight with 1k prompts (bar 1k/1k at 16, whose "
    "84 ms the repeat measured as 131 ms), within 1.18x either way at 64-128, and 1.28-1.66x optimistic with 8k prompts, whose measured "
    "first token grows with the load faster than the model's (92 ms after the undelayed model's at 4 in flight, "
    "482 ms at 128). On H100 the K/V cache binds: at 64 in flight with 8,192-token answers memory holds 34 requests "
    "at their final lengths; the model, allocating K/V as tokens come and preempting the latest admitted where it "
    "runs out, as vLLM does, starts all 64 and preempts 505 times over the 640 requests: 6.6 s to the first token "
    "on average where vLLM took 20 s (3.0x optimistic; reserving each request's final length from admission gave "
    "151 s, 7.5x pessimistic); with 8,192-token prompts at 32 in flight vLLM's first "
    "token took 2.9 s where the model fits all 32 (6.2x optimistic). The repeat of the H200 TP8 run a day earlier "
    "agrees within 2.2% on TPOT in 17 of its 18 cells (4.2% at 1k/1k with 16 in flight) and within 9 ms on TTFT in "
    "15. On B200 (29 points: vLLM 0.19.0 on 2 and 4 GPUs, TP2, TP4, TP2 EP2 and TP4 EP4, an FP8 K/V cache, 1k/1k and "
    "8k/1k; 0.17.0 TP2 EP2 and TP4 EP4 at 1k/8k; 4, 16, 64 and 256 in flight) the TPOTs are 0.85-1.25x of the "
    "measured (1.10x median error): 0.89-1.03x at 4 in flight, 1.02-1.25x at 16-64 (the most on 2 GPUs: 1.16-1.25x "
    "at 64) and 0.85-0.99x at 256, where the measured decode slows more than the model's, as on H200 TP8 at 128: no "
    "B200 decode gap beyond H200's. The first tokens (in source) of 1k/1k are 0.95-1.27x of the measured: at 4-64 in "
    "flight the measured first token comes 27-45 ms after the model's less its 49.6 ms delay (27-35 ms on 4 GPUs, "
    "32-45 on 2), about the fitted delay, where H200 TP8's came 71-82 ms after. With 8,192-token prompts they are "
    "1.28-1.36x early: the measured first token 110-256 ms after the undelayed model's on TP2 and 91-416 ms on TP4 at "
    "4-64 and 4-256 in flight, growing with the load as on H200 TP8. On 0.17.0 with 8,192-token answers they are "
    "1.13-1.47x early (67-95 ms after the undelayed model's). On 2 GPUs at 256 requests of 8,192-token prompts the K/V "
"cache binds (memory holds 99 at their asked lengths; the measured TPOT is 46.7 ms at 128 and 46.9 at 256): "
    "both queue, 54.8 s to the first token predicted against 63.7 s. On 0.17.0 at TP2 EP2 with 64 in flight and "
    "8,192-token answers memory holds 58 requests at their final lengths; with K/V allocated as tokens come all 64 "
    "start: 0.18 s to the first token against 0.24 s (reserving the final lengths gave 1.74 s, 7.3x pessimistic).",
    "- GPUStack's DeepSeek-R1 on 8x H200 (GPS; vLLM 0.11.0, AR, every request sent at once): throughput is 1.12x, "
    "1.30x and 1.29x optimistic with 32k, 4k and 2k prompts, the median TTFT 1.10x, 1.28x and 1.29x (the means 1.10x, "
    "1.31x and 1.32x), and the mean "
    "TPOT 1.05x, 1.14x and 1.20x (1.72x, 1.58x and 1.56x before a request's memory share left the prompt's "
    "activations to the prefill budget's one workspace, which lets more requests run at once: 1.10-1.22x, "
    "1.08-1.25x and 1.56-1.72x; 1.31-1.60x, 1.29-1.77x and 1.90-2.04x before the routed experts' fused MoE kernel "
    "took its measured rates). The simulation feeds the prompts 8,192 tokens a step beside the decodes, as "
    "vLLM does (a decode waits a prompt step per token while a burst is prefilled: 164-365 ms a token measured), "
    "so what is left is the prefill itself, about 1.4x faster in the model than on these GPUs at 2k (before the "
    "budget every prompt admitted at once shared one pass, 211 of them at 2k, and the decodes then ran light "
    "steps: TPOT 4.60x and 6.04x optimistic at 4k and 2k). The 1,000 requests of 128 prompt and 4 answer tokens "
    "are 2.27x optimistic in throughput and 2.56x in median TTFT (2.59x the mean), the mean TPOT 1.35x (1.04x while the AR scheme "
    "ran a decode step for the answer's last token too: 4 steps in the 3 gaps between 4 tokens; 4.15x, 7.04x and 1.63x before "
    "the requests shared the API server; 5.43x, 9.25x and 1.22x before the stack's front end): their 127k prompt "
    "tokens take 22 s where the 2k run moves as many in about 7 s, so the time goes to the requests themselves "
    "(the API server's chat template, tokenising and streaming for 1,000 at once). The measured first tokens come "
    "together, late (mean, median and p99 TTFT 19.4, 19.0 and 21.4 s of 22.1 s): the server is one asyncio loop "
    "that advances every request it holds in turn, so none reaches the engine before nearly all have been taken "
    "in, and the model now has them share it so (predicted 7.4, 7.4 and 9.6 s, and a 260 ms TPOT, as the 1,000 "
    "decode together). What is left is the front end's cost a request: the vllm stack's 5 ms (measured on vLLM's "
    "mock engine, PR #43469) lets them all in after 5 s, where the run's first tokens imply about 17 ms a request "
    "in one server (this publisher's other 1,000-request vLLM 0.11 bursts take about 22 s whatever the model, but "
    "4.7 s for gpt-oss-20b, whose chat requests vLLM renders with the Harmony library instead of the Jinja chat "
    "template: serving_chat.py, use_harmony), which the other sources do not support and is not fitted here.",
    "- The SGLang cookbook's Llama-3.1-70B on 8x A100 (SGCL; SGLang 0.5.6, AR, default launch): at one request "
    "in flight the time per token after the first is 1.07x optimistic (17.4-17.6 ms predicted, 18.6-18.8 ms measured; "
    "1.28x before the A100's GEMMs took their measured weight-streaming rate, 0.71 of peak and 4.6 us a kernel, "
    "where a TP8 pass reads matrices of 16-117 MB a GPU, and 1.14x before decode's attention took its measured "
    "rate, 0.46 of peak and 16.5 us a layer) and so are throughput and mean E2E (1.07-1.09x). Under load "
    "the TPOT is 1.17-1.32x optimistic and throughput 1.15-1.31x. The runs' prompts are partly in SGLang's radix cache (--cached-prompt, from the order the page "
    "prints them: bench_serving's random prompt i is the i-th ShareGPT prompt of a shuffle seeded the same in every "
    "run, cut to the i-th drawn length, and the first lengths are the same whatever the prompt count, so each run's "
    "first requests repeat the earlier runs' prompts, whole or in part; the default launch keeps the cache, and "
    "bench_serving flushes it only in SGLang's CI or with --flush-cache): the first 80 of the 320 requests at 64 in "
    "flight, the whole first wave, are cache hits. With them and the sglang stack's first-token delay (25.8 ms for Llama's 80 "
    "layers at 323 us a layer, fitted on SGP13094's Llama-3.1-8B one-request first tokens; 65.6 ms at the 820 us fitted "
    "on SGCR's DeepSeek-R1 before) the median TTFT is 1.05x and 1.08x pessimistic at one request "
    "and at 16 in flight and 1.23x optimistic at 100 with 1,000-token prompts (138, 159 and 150 ms predicted, 132, 147 and 184 ms "
    "measured), and with 8,000-token prompts 1.08x pessimistic at one request, 1.17x optimistic at 16 and 2.13x at 64 "
    "(289 ms predicted, 616 ms measured; 1.68x under the previous, larger delay, which masked it). The means, not scored, are "
    "1.07x optimistic at one request, 1.17x pessimistic at 100 in flight and 1.47x optimistic at 16 with 1,000-token "
    "prompts (181 ms predicted, 265 ms measured), 1.25x, "
    "1.18x and 1.73x optimistic at 1, 16 and 64 with 8,000-token ones (without the delay the one-request means are "
    "1.36x early, 97 and 291 ms). SGLang's eager "
    "prefill (its graphs cover decode only) adds 25.8 ms to each prefill here (80 layers x 292 us and 161 all-reduces "
    "x 15 us launched from Python, the sglang stack's prefill_eager; 4.6 ms at the decode-measured 28 us a layer it "
    "was charged before), and a 1,000-token prompt's mean first token at one request still lacks 35 ms without the "
    "delay, 9 ms with it. It is not in the kernels either: built op by op from "
    "NVIDIA aiconfigurator's measured A100 tables (ai-dynamo/aiconfigurator 095f58a5, systems/data/a100_sxm: "
    "SGLang's bf16 GEMMs and context attention, NCCL's all-reduce), the nine uncached one-request prefills "
    "(73-961 tokens) take 87 ms on average in their GEMMs, attention and all-reduces against the model's 78 ms "
    "for the same ops (the narrow TP8 slices of the GEMMs at 600-1,000 rows and short prompts' attention run "
    "slower than the model has them; the all-reduces agree), where the measured first tokens take about 144 ms: "
    "a per-request cost that the first-token delay, fitted on another publication, now stands for. While "
    "every request of a length class ran its class's passes, the loads' completions came in waves whose refills' "
    "prefills queued behind each other, and the TTFT under load was 1.02x optimistic to 2.53x pessimistic (4.79x "
    "pessimistic at 64 in flight with 8,000-token prompts without the cache, when the first wave's 256k prompt "
    "tokens were prefilled 8,192 a step); throughput and TPOT under load were 1.04-1.56x optimistic before the cache, the prefill it saves "
    "having hidden part of the too-fast decode.",
    "- The SGLang cookbook's DeepSeek-R1-0528 on 8x B200 (SGCR; SGLang 0.5.6.post1, AR, FP8, default launch, TP8): "
    "at one request in flight the time per token after the first is 1.21-1.22x optimistic (7.54-7.58 ms predicted, "
    "9.16-9.26 ms measured), throughput and mean E2E 1.21-1.23x; under load the TPOT is 1.07-1.15x and throughput "
    "1.08-1.17x optimistic. Without a first-token delay the mean TTFT at one request was 1.73x optimistic with "
    "1,000-token prompts (89 ms predicted, 153 ms measured), 1.87x in the reasoning run that repeats those prompts "
    "(67 ms and 126 ms: wholly in the radix cache, read as SGCL's runs are) and 1.43x with 8,000-token prompts (116 "
    "ms and 166 ms). What the model lacked was about the same in all three, 64, 59 and 50 ms, for prompts of 610 and "
    "4,194 tokens on average, cached or not (63, 36 and 17 ms were no prompt cached; the measured first token comes 27 ms sooner "
    "when the same prompts are sent again, the model's cached prefill 21 ms sooner), on top of the 59.6 ms of eager "
    "dispatch the stack already charges each prefill (its prefill_eager block; the latent-attention part the residual "
    "of SGLang PR #12160's DeepSeek-V3 prefill of one new token): a "
    "cost a request that does not grow with the prompt, which no source here times. The sglang stack's "
    "first_token_us_per_mla_layer carries it, fitted on these three runs' median first tokens (820 us a "
    "latent-attention layer, 50.0 ms for DeepSeek-R1's 61; first fitted at 978 us on the means; all its TTFTs in "
    "source); the other models' layers take 323 us, fitted on SGP13094 (below): the "
    "model's medians without it are 92, 67 and 120 ms against measured medians of 141, 126 and 155 ms, and with it "
    "the one-request median TTFTs are 1.01x pessimistic, 1.08x optimistic and 1.10x pessimistic (142, 117 and 171 ms "
    "predicted), the means 1.10x and 1.07x optimistic and 1.00x. Under load the median TTFT is 1.18x pessimistic to "
    "1.26x optimistic (132-225 ms measured, near the one-request medians) and the mean, not scored, 1.44-4.35x "
    "optimistic (2.57-7.52x without the delay): the means carry opening-wave tails (P99 0.27-6.26 s). The largest, "
    "4.35x at 64 in flight with 8,000-token prompts (210 ms predicted, 914 ms measured; the median 201 ms against "
    "225 ms, 1.12x), is where the cache reading finds the whole first wave cached by the run at 16; without it the "
    "model predicts a mean of 745 ms (1.23x), and the measured P99 of 6.26 s looks like an uncached first wave (64 prompts "
    "of 4,000 tokens on average, prefilled 16,384 tokens a step).",
    "- The same cookbook's MiniMax-M2.5 (SGCM; AR, FP8, TP8 EP8 with --mem-fraction-static 0.85; one author): on 8x "
    "B200 (SGLang 0.5.8) decode is 1.42-1.43x optimistic at one request (7.0 ms predicted, 9.9-10.0 ms measured) and "
    "1.50-1.70x under load, on 8x H100 (0.5.9) 1.11-1.14x and 1.03-1.10x optimistic: the page's B200 runs decode slower than "
    "its H100 runs (98 against 119 tok/s at one request), a slower path on Blackwell than the B200 rates describe "
    "(not modelled). The measured first token at one request takes the same time for prompts of 610 and 4,194 "
    "tokens on average (medians 116 and 127 ms on B200), as SGCR's does, and the model without a first-token delay "
    "lacks 76 and 69 ms of the mean (2.39x and 2.11x optimistic; 54 and 47 ms while the eager prefill was charged "
    "the 965 us an MoE layer that carried DeepSeek's latent attention); with the sglang stack's delay for MiniMax's "
    "62 grouped-query layers (323 us a layer, fitted on SGP13094: 20.0 ms) the median TTFT at one request on B200 is "
    "1.53x optimistic with 1,000-token prompts (76 ms predicted, 116 ms measured) and 1.51x with 8,000-token ones "
    "(84 ms and 127 ms), the means 1.75x and 1.60x optimistic; on H100 the median is 1.06x pessimistic (85 ms "
    "predicted, 80 ms measured) and the mean 1.76x optimistic (83 ms and 145 ms, with a P99 of 633 ms: one slow "
    "request of ten; 2.32x optimistic without the delay). The model has the H100's first token 9 ms after the "
    "B200's, where the measured median comes 36 ms before it: no delay a layer meets both (at DeepSeek's 820 us a "
    "layer, 50.8 ms, and 965 us an MoE layer of eager prefill, the B200 medians were met, 1.11x and 1.08x pessimistic, and the H100 one 1.72x pessimistic). "
    "Under load the B200 median TTFT is 1.28-2.02x optimistic (107-188 ms measured) and the mean, not scored, "
    "2.71-7.11x optimistic (P99 1.05-4.93 s); on H100 the median is 1.10-1.12x pessimistic and the mean 1.23-1.24x "
    "optimistic.",
    "- The same cookbook's DeepSeek-V3.1 on 8x MI300X (SGCV; SGLang 0.5.7, AR, FP8, default launch, TP8; the first "
    "measured MI300X serving numbers here; nothing fitted on them). The hardware file times the MI300X's kernels "
    "as aiter's tuned tables of mid-2026 do (FP8 block-scale GEMMs at 1-64 rows 3.8 us + the weights at 0.40 of "
    "the peak bandwidth, fused MoE blocks 2 x 14 us + the experts at 0.80, the MLA decode kernel 15.5 us); on those "
    "alone the time per token after the first is 2.79-2.90x optimistic at one request (8.5 ms predicted, 23.8-24.9 "
    "ms measured). SGLang 0.5.7 ran before those tables: aiter's releases from v0.1.10 (2026-01) held no tuned "
    "MI300X block-scale GEMMs and none held MI300X fused MoE tuning before 2026-04, and tuning one GEMM shape took a "
    "DeepSeek-R1 TP8 run's TPOT from 28.8 to 22.1 ms at 4 in flight (ROCm/aiter PR #1930). The sglang stack's "
    "slow_kernels carry that on the MI300X and MI325X at fp8: each pass 242.61 us a decoder layer plus 0.55 us a "
    "layer for each token it runs (a prefill's prompt tokens, a decode step's requests), fitted on SGCM2's MiniMax-M2 "
    "runs (another page, author, model and TP; below). Scored here, the time per token is 1.02-1.06x "
    "optimistic at one request (23.4 ms predicted) and 1.05-1.15x under load with 1,000-token prompts, 1.34-1.42x "
    "with 8,000-token ones (1.44-1.46x at the per-token part's previous 0.31 us, 1.52-1.59x with a fixed 243 us a "
    "layer), whose prefills the per-token part slows (61 x 8,000 x 0.55 us = 268 ms more for a prompt of 8,000 "
    "tokens) but not enough. The all-reduces do not account for the rest: a token's 123 "
    "collectives at the published small-message times on the MI300X (7.4 us for the engines' custom all-reduce, "
    "13.7-15.5 us for RCCL's) take 0.9-1.9 ms. The median TTFT, with the sglang stack's first-token delay fitted on "
    "SGCR's B200 runs (50.0 ms for the 61 latent-attention layers), is 1.07x pessimistic to 3.34x optimistic, the "
    "means, not scored, 1.18-3.48x optimistic, the one-request means noisy (1,000-token prompts: mean "
    "558 ms against 178 ms predicted, median 214 ms against 188 ms, P99 1,625 ms; the reasoning run that repeats them, "
    "wholly cached: mean 157 ms, P99 160 ms, against 133 ms predicted). Its 8,000-token run at 16 in flight has a "
    "median first token of 1,347 ms, 2.7x the same server's median at 64 in flight (499 ms), where the model predicts "
    "404 and 373 ms (3.34x; 3.86x, the headline's worst number until then, at slow_kernels' previous 0.31 us a layer "
    "a token, 3.40x while the decodes ran beside the prefills and it was 0.65 us; its mean 1.78 s against 512 ms "
    "predicted, 3.48x).",
    "- The same cookbook's MiniMax-M2.7 on 2x GB300 TP2 (SGCM7; SGLang 0.5.10.post1, another author), run on the "
    "sglang-pcg stack: that release replays prompt prefills from piecewise CUDA graphs (sglang charges their eager "
    "launches, about 41 ms a prefill here: 62 layers of 292 + 346 us and 125 all-reduces of 15 us, 63 ms at the "
    "`eager:` block's 28 + 965 us it charged before, and predicts the one-request mean TTFT 1.79x pessimistic, 90 ms "
    "against 50 ms). On sglang-pcg the median is 1.05x optimistic (51 ms predicted, 54 ms measured) and the mean "
    "1.04x (48 ms against 50 ms): the undelayed model's mean first token comes 22 ms early here (28 ms predicted, "
    "1.77x optimistic), about the 20.0 ms the first-token delay charges MiniMax's 62 grouped-query layers (323 us a "
    "layer, fitted at TP8 on SGP13094's Llama-3.1-8B); at DeepSeek's 820 us a layer (50.8 ms) it overshot, the median "
    "1.53x and the mean 1.58x pessimistic. Decode is "
    "1.17x optimistic at one request and 1.10x at 100 in flight, throughput 1.17x and 1.09x; the median TTFT at 100 "
    "is 1.51x optimistic (61 ms predicted, 92 ms measured; 1.03x under the larger delay) and the mean, not scored, "
    "2.17x optimistic (114 ms predicted, 248 ms measured; 2.85x without the delay): the tail the other cookbook runs "
    "show.",
    "- InferenceX's DeepSeek-R1-0528 on 8x H200 on SGLang 0.5.12 (IFX12; FP8, TP8, AICS's launch and harness three "
    "releases later, 1,024 and 8,192-token prompts at 4-64 in flight), run on the sglang-pcg stack: decode is "
    "pessimistic, the TPOT 1.04-1.18x and throughput 1.03-1.19x (0.5.12 decodes faster than AICS's 0.5.9 measured: "
    "9.7 against 10.3 ms at 4 in flight with 1,024-token prompts). With the first-token delay sglang-pcg "
    "inherits (50.0 ms, 820 us a latent-attention layer, fitted on SGCR) the mean TTFT is 1.19-1.45x optimistic with 1,024-token prompts (121 ms "
    "predicted, 158 ms measured at 4 in flight) and 1.10x pessimistic to 1.20x optimistic with 8,192-token ones at "
    "4-32 in flight (1.71x at 64): at 4 in flight 36 ms still missing with the short prompts and 36 ms too many with "
    "the long ones (94 and 21 ms missing without the delay, against the 50-64 ms SGCR lacked at TP8). On "
    "the sglang stack, which charges the eager prefill launches too, the same commands predict TTFTs 1.24x "
    "pessimistic to 1.11x optimistic with 1,024-token prompts and 1.26x pessimistic to 1.57x optimistic with "
    "8,192-token ones, and decode 1.05-1.27x pessimistic. The same publisher's B300 curve on 0.5.12 (TP8 at 1-64 in "
    "flight with 1,024-token prompts, TP4 and TP8 at 1-4 with 8,192-token ones; FP8 K/V, AICS's B200 launch) "
    "agrees on decode: within 1.02x optimistic and 1.16x pessimistic, throughput within 1.03x optimistic and 1.15x "
    "pessimistic. Its mean TTFT on sglang-pcg is 1.20x pessimistic to 1.41x optimistic with the short prompts (85 ms "
    "predicted, 71 ms measured at one request: the delay overshoots there, 2.02x optimistic without it) and "
    "1.40-1.71x optimistic with the long ones; on sglang 2.04x pessimistic to 1.23x optimistic and 1.12-1.40x "
    "optimistic.",
    "- InferenceX's DeepSeek-R1-0528 on 8x MI325X on SGLang 0.5.19 (IFX19; FP8 weights and K/V, TP8, 8,192-token "
    "prompts at 4-64 in flight, published 2026-09-10; the launch's --mem-fraction-static 0.8, 131,072-token "
    "chunks and --num-continuous-decode-steps 4 as --recv-interval 4), run on the sglang-pcg stack, with the "
    "MI325X's tuned decode kernels and the sglang stack's slow_kernels (fitted on SGCM2's MI300X runs on 0.5.7) it "
    "inherits: decode is pessimistic, 1.43x at 4 in flight (26.4 ms predicted, 18.5 ms measured), 1.31-1.43x at 8-32 "
    "and 1.13x at 64 (75.4 against 66.6 ms), throughput 1.15-1.40x pessimistic (1.02-1.35x at slow_kernels' previous "
    "0.31 us a layer a token; with a fixed 243 us a layer decode "
    "was 1.38x pessimistic at 4 to 1.16x optimistic at 64). The mean TTFT is 1.41x optimistic at 4 in flight "
    "(0.73 s predicted, 1.03 s measured) and 1.08x at 8, and 1.16x, 1.32x and 1.41x pessimistic at 16, 32 and 64 "
    "(2.71 against 1.92 s at 64): slow_kernels' per-token part adds 61 x 8,192 x 0.55 us = 275 ms to each prefill of "
    "these prompts (155 ms at 0.31 us, when the TTFT was 1.75x optimistic at 4 to 1.09x pessimistic at 64), and from "
    "16 in flight the queued prefills overshoot (with a fixed 243 us a layer the TTFT "
    "was 1.48-2.52x optimistic). A later release than the 0.5.7 the slow_kernels were fitted on decodes faster than they "
    "say, where its first tokens at 4-8 in flight come later than the model's; the sglang stack, charging eager prefill launches, predicts 0.79 s at 4.",
    "- The same cookbook's MiniMax-M2 on 4x MI300X TP4 (SGCM2; SGLang 0.5.7, FP8, --mem-fraction-static 0.85, no "
    "--ep; another author than SGCV's): the second MI300X publication here, another model (GQA attention, not "
    "DeepSeek's MLA) and TP. On the tuned kernel times alone decode is 3.11x optimistic at one request (7.1 ms "
    "predicted, 22.2 ms measured), as SGCV's DeepSeek-V3.1 runs are: (22.21 - 7.13) ms over 62 layers is 243 us a "
    "layer for a pass of one token. The sglang stack's slow_kernels are fitted here (all this curve's numbers in "
    "source): 0.55 us a layer for each token a pass runs, by least squares on the log ratio of the six speed numbers "
    "at 16 and 100 in flight (throughput, mean E2E, mean TPOT; the TTFTs left out; the runs simulated with the "
    "prefills before the decodes, as SGLang runs them, and the prefills dispatched as the sglang stack's "
    "prefill_eager says: 0.31 us with the `eager:` block's figures, 0.65 us while the prefills also ran beside "
    "the decodes), and 242.61 us a layer on the "
    "one-request TPOT with it. With them, decode at 16 and 100 in flight is 1.08x pessimistic and 1.03x optimistic "
    "(1.06x pessimistic and 1.10x optimistic with a fixed 243 us), the median TTFT 1.08x and 1.23x optimistic with "
    "the first-token delay (323 us a layer, fitted on SGP13094; 137 and 150 ms predicted, 148 and 184 ms measured; "
    "1.18x and 1.10x pessimistic while the delay was the 820 us a layer fitted on SGCR's DeepSeek runs and the eager "
    "prefill's MoE layers 965 us) and the mean, not "
    "scored, 3.60x and 1.68x optimistic. At one request only the TPOT is scored: one request of the ten waited about 38 s for its first token "
    "(P99 TTFT 38.3 s, median 385 ms), a warm-up the mean TTFT, mean E2E and throughput carry.",
    "- The same cookbook's Qwen3-Coder-480B-A35B on 8x MI300X (SGCQ; SGLang 0.5.7, FP8, TP8 with --ep 2, random "
    "1,000 / 1,000 at 1, 16 and 64 in flight; another author; nothing fitted on it), launched with SGLANG_USE_AITER=0: "
    "SGLang's Triton FP8 GEMM and fused-MoE kernels, not aiter's, where the sglang stack's slow_kernels name the part "
    "and precision, not the kernel library. Decode is 1.37x pessimistic at one request (23.4 ms predicted, 17.1 ms "
    "measured), 1.13x pessimistic at 16 in flight (33.4 against 29.4 ms) and 1.30x optimistic at 64 (48.5 against "
    "63.0 ms), throughput 1.35x pessimistic to 1.23x optimistic; the median TTFT 1.05x pessimistic at one request "
    "(133 against 126 ms) and 1.06x and 1.29x optimistic at 16 and 64 (149 and 141 ms against 157 and 182 ms; "
    "1.39x, 1.21x and 1.07x pessimistic while the first-token delay and the eager prefill's MoE layers took the "
    "820 and 965 us a layer fitted on DeepSeek), the mean, not scored, 1.55x optimistic at one request (124 against "
    "192 ms) and 2.39x and 2.64x at 16 and 64 (163 and 141 ms against 389 and 373 ms). The Triton path ran "
    "one request faster than aiter's untuned kernels did on SGCM2 and SGCV (17.1 ms a token for the larger model, "
    "against 22.2-24.9 ms) and slowed more with the batch: the slow_kernels' fixed part too large for it, their "
    "part per token too small.",
    "- The same cookbook's Qwen3 page (SGCQ3; Qwen3-235B-A22B-Instruct-2507, bf16, on 8x B200 TP8, SGLang 0.5.6, "
    "the default launch; the same nine random runs as SGCR's, 1,000 / 1,000 at 1, 16 and 100 in flight, 1,000 / "
    "8,000 and 8,000 / 1,000 at 1, 16 and 64; another author, model and precision than SGCR's; nothing fitted on "
    "it): the first bf16 MoE on Blackwell here. Decode is 1.11-1.13x optimistic at one request (9.1 ms a token "
    "predicted, 10.1-10.3 ms measured; 7.5 ms, 1.35-1.37x, before the Blackwell parts' bf16 fused MoE blocks took "
    "their measured rate), 1.09-1.11x pessimistic at 16 in flight and 1.04x optimistic to 1.03x pessimistic at 64 "
    "and 100 (22.8 against 23.7 ms with 8,000-token answers at 64); throughput 1.13x optimistic to 1.09x "
    "pessimistic, the mean E2E 1.14x optimistic to 1.17x pessimistic. "
    "The median TTFT is 1.07x optimistic to 1.32x pessimistic at one request (102-144 ms predicted, 92-115 ms "
    "measured) and 1.23x optimistic to 1.40x pessimistic under load; the mean, not scored, 1.08x optimistic to 1.20x "
    "pessimistic at one request and 1.39-2.25x optimistic under load. The per-layer host terms are the sglang "
    "stack's for a grouped-query MoE model: the first-token delay at 323 us a layer (fitted on SGP13094) and the "
    "eager prefill at 292 + 346 us an MoE layer (measured on prefills), 30 and 60 ms over this model's 94 layers. "
    "While both were DeepSeek's, 820 us a layer (fitted on SGCR) and 965 us an MoE layer that carried its latent "
    "attention, they came to 77 and 91 ms, together more than the whole measured median first token, and the "
    "medians were 1.67-2.19x pessimistic at one request and 1.20-2.31x under load.",
    "- The same cookbook's GLM-4.6 page (SGCG; GLM-4.6, 355B parameters with 32B active, bf16, on 8x B200 TP8, SGLang "
    "0.5.6.post1, the default launch; the same nine random runs as SGCR's; another author and model; nothing fitted on "
    "it; its dimensions from public copies of the config, validation/models/glm-4.6.yaml): decode is 1.54-1.56x "
    "optimistic at one request (9.6 ms a token predicted, 14.8-15.0 ms measured) and 1.18-1.22x under load; throughput "
    "1.19-1.56x optimistic (1.83-1.85x at one request before the Blackwell parts' bf16 fused MoE blocks took their "
    "measured rate). The same release on the same part decodes Qwen3-235B (SGCQ3, 94 layers against 92) at "
    "10.1-10.3 ms a token, 11-12 us a layer over the model where GLM-4.6 runs 57-58 us over it: what GLM-4.6's layers "
    "add (a shared expert, biased attention projections, 160 experts, a sigmoid router with a correction bias) is not in "
    "the page; the measured fused MoE blocks have no 160-expert shape, and a Triton configuration untuned for it is "
    "one reading, not checked. The median TTFT is 1.04-1.41x optimistic at one request (100-154 ms predicted, 140-159 "
    "ms measured) and 1.15-1.44x optimistic under load (1.26-1.45x pessimistic at one request while the first-token "
    "delay and the eager prefill's MoE layers took DeepSeek's 820 and 965 us a layer); the means, not scored, "
    "1.26-2.12x optimistic.",
    "- The same cookbook's GLM-4.7-Flash page (SGCF; GLM-4.7-Flash, 30B parameters with 3B active, MLA and 64 "
    "experts as DeepSeek-V3 lays them out, bf16, on one B200, SGLang 0.5.7, launched with --attention-backend triton; "
    "the same nine random runs as SGCR's; its dimensions from public copies of the config, "
    "validation/models/glm-4.7-flash.yaml): listed, not modelled. Its time per output token at one request grows "
    "with the context, 8.75 ms at about 800 tokens, 10.94 ms at 2,800 and 12.63 ms at 4,400, 1.1 us for each token "
    "of context where reading the latent cache takes 7 ns: SGLang's Triton MLA kernels, which its maintainers "
    "describe as slowing markedly as prompts grow (sgl-project/sglang PR #3550); the stack's attention rates are "
    "FlashInfer / FlashAttention-3 class, and dlmcost predicts 5.1-5.2 ms at every length (1.7-2.4x optimistic). "
    "Its median first tokens with 1,000-token prompts, 95-123 ms at 1-100 in flight, are 0.93-1.12x of what the "
    "model predicts, the sglang first-token delay for latent-attention layers (820 us a layer, fitted on DeepSeek-R1 "
    "at TP8) included: one "
    "GPU and another MLA model, not scored.",
    "- The same cookbook's Gemma 4 page (SGCGEM; gemma-4-31B-it, dense, on two H200 at TP2, and gemma-4-26B-A4B-it, "
    "128 experts of 704 beside a dense MLP on every layer, on one H200; bf16, SGLang's gemma4 branch, the default "
    "launch; its text runs, 10 prompts at 1 and 1,000 at 100 of bench_serving's default random 1024 / 1024; the "
    "dimensions from public copies of the configs, validation/models/gemma-4-31b.yaml and gemma-4-26b-a4b.yaml): read "
    "on the sglang stack (eager prompt prefills: SGLang switches its piecewise prefill graphs off for a multimodal "
    "architecture), the Triton attention backend SGLang picks for Gemma 4 not modelled. Decode at one request is "
    "1.05x optimistic on the 31B (11.7 ms predicted, 12.3 measured) and 1.26x optimistic on the 26B-A4B (4.4 ms, "
    "5.6 measured); at 100 in flight the 31B's is 1.04x optimistic (32.6 ms, 34.0 measured), where reading the "
    "cache outweighs the weights, and the 26B-A4B's 1.02x pessimistic. The median first token at one request is "
    "1.21x (31B: 91 ms predicted, 75 measured) and 1.06x (26B-A4B: 50 ms, 47 measured) pessimistic, with the eager "
    "prefill charged as measured on prefills (292 us a layer, 346 more an MoE layer) and the first-token delay at "
    "323 us a layer; 1.40x and 1.61x while the eager prefill took the 965 us an MoE layer fitted on DeepSeek-V3 (30 ms "
    "over the 26B-A4B's 30 layers) and the delay DeepSeek's 820 us a layer. The image runs and the E2B / E4B models (per-layer embeddings, "
    "refused by the model spec) are left out.",
    "- SGLang PR #13094 (SGP13094; b8zhong, 2025-11-11, '[Piecewise CUDA Graph] Support ModelOpt FP8'): "
    "nvidia/Llama-3.1-8B-Instruct-FP8 (ModelOpt) at TP8 on GPUs the PR does not name (read as H100s: the "
    "FlashAttention-3 backend it launches runs on Hopper parts only; on H200s the predictions move by 5% or less), "
    "1,024-token prompts and 16-token answers at 1, 4, 16 and 32 in flight, each load run with prompt prefills "
    "launched eagerly (the release before the PR: the sglang stack) and replayed from piecewise CUDA graphs (the "
    "sglang-pcg stack). Two of the sglang stack's numbers are fitted on its one-request runs, so all its 24 numbers "
    "are in source: prefill_eager's us_per_layer, 292 us, from the eager mean first token less the graphed one "
    "(29.97 - 19.66 = 10.31 ms, less 65 all-reduces x 15 us, over 32 layers; the block's MoE and latent-attention "
    "parts come from SGLang PRs #13081 and #12160, not validation points), and first_token_us_per_layer, 323 us, "
    "from the two one-request mean first tokens, each 10.35 ms beyond what the passes and their dispatch predict "
    "(over 32 layers). Those two are met (30.0 and 19.6 ms predicted). The rest: the one-request mean TPOT is 1.25x "
    "pessimistic in both columns (3.01 ms predicted, 2.40 ms measured; throughput 1.11x and 1.14x pessimistic); at 4 "
    "in flight the measured decode differs between the columns, 2.74 ms a token eager and 3.75 ms graphed, where the "
    "two stacks share the decode, so the TPOT is 1.11x pessimistic eager and 1.23x optimistic graphed (throughput "
    "1.10x and 1.28x optimistic) and the mean TTFT 1.26x and 1.31x optimistic (47 and 37 ms predicted, 60 and 49 ms "
    "measured); at 16 and 32 in flight the TPOTs are within 1.14x, the throughputs within 1.09x and the mean TTFTs "
    "within 1.08x, either column.",
    "- ROCm/aiter PR #1930 (AITR; DeepSeek-R1 on 8x MI300X TP8, SGLang's serving benchmark at 1,024 / 1,024 tokens, "
    "median TPOT at 4-32 in flight before and after its tuned config for one GEMM shape, 2,112 x 7,168; the release "
    "and launch unstated, read as the same author's published MI300X launch of SGLang PR #14043; nothing fitted on "
    "it). The before runs are the untuned kernels the sglang stack's slow_kernels describe (fitted on SGCM2, another "
    "author and model): their TPOT is 1.14x optimistic at 4 in flight (25.3 ms predicted, 28.8 ms measured) and "
    "1.24-1.49x at 8-32 (27.7-37.5 ms predicted, 37.2-47.2 ms measured; 47.2 ms at 16 above 46.6 ms at 32). The "
    "after runs, that one shape tuned, are 1.15x pessimistic at 4 (22.1 ms measured) and 1.03-1.09x pessimistic at "
    "8-32 (1.01-1.07x with a fixed 243 us a layer: the per-token part slows the larger batches for tuned and "
    "untuned kernels alike): tuning one GEMM shape of the layer took 6.7-16.3 ms off a token, so part of what "
    "slow_kernels' 242.61 us a layer carries is that one GEMM, and a release that ships its tuned config decodes faster than the stack says.",
    "- Where the cookbook runs' mean TTFT misses sits (the pages print each run's median and P99 beside the mean; "
    "the headline now scores the median, the model's median read from the same simulation, the sglang stack's "
    "first-token delay included, and lists the mean beside it): under load the model's median time to first token "
    "is 1.18x pessimistic to 1.26x optimistic against SGCR's medians (mean 1.44-4.35x optimistic; both in source), "
    "1.28-2.02x optimistic against SGCM's on B200 (mean 2.71-7.11x optimistic), 1.10-1.12x "
    "pessimistic on H100 (mean 1.23-1.24x optimistic), 1.08-1.23x optimistic against SGCM2's (mean 1.68-3.60x "
    "optimistic; both in source) and 1.08x pessimistic to 2.13x optimistic against SGCL's (mean 1.17x pessimistic "
    "to 1.73x optimistic), and 1.07x pessimistic to 3.34x optimistic against SGCV's (mean 1.47-3.48x optimistic; "
    "3.34x with 8,000-token prompts at 16 in flight). For SGCR's and SGCM's twelve runs under load the measured means' "
    "lead over the measured medians, 2.81 s summed, is nearly all the model's means lack, 2.93 s: the mean "
    "misses are a tail of a few slow first tokens (P99 0.24-6.26 s), largest in the first run under load on each launch "
    "and small in the later runs that resend the same prompts (1k/8k: P99 268 and 475 ms). Two readings fit and "
    "these pages cannot tell them apart: an uncached first wave (without the cache reading the model predicts "
    "SGCR's 8k/1k P99 at 64 in flight as 5.13 s, measured 6.26 s), or one-time costs of request shapes the server "
    "meets first. The medians themselves the per-request delay meets on SGCR's runs (the model's within 31 ms of the "
    "measured) and SGCM's on H100 (8-12 ms late), where SGCM's on B200 come 23-95 ms after the model's.",
    "- dstack's DeepSeek-R1 post (DSTK; 8x MI300X TP8, SGLang 0.4.2.post4 and vLLM 0.7.3 from ROCm staging images of "
    "February 2025, default launches, 500 prompts of exactly 3,200 tokens at 4-128 in flight, answers of 800 and at 128 "
    "also 1,600, 3,200 and 6,400 tokens; not modelled: releases older than the stacks describe, vLLM's on its V0 engine). "
    "Shown apart: with the sglang stack's slow_kernels SGLang's decode is 1.36x optimistic at 4 in flight (25.7 ms "
    "predicted, 34.9 ms measured) and 1.35-1.93x under load, the most at 128, its median TTFT with the first-token "
    "delay 1.85x at 4 in flight (867 ms predicted for a 3,200-token prompt, 1.61 s measured) and 1.58-2.19x at 8-128 "
    "(the means 1.90x at 4, 867 ms against 1.64 s, and 1.73-1.79x at 8-128; 2.25x and 2.31x at 4 at slow_kernels' "
    "previous 0.31 us a layer a token; the medians 2.2-21x and the means "
    "1.8-5.1x at 8-128 while the decodes ran beside the prefills), where requests queue "
    "behind prefills several times slower than the model's; vLLM's decode 4.34x at 4 in flight and 2.20-2.85x at "
    "128. The same post's H200 runs (SGLang 0.4.3.post2 with --enable-dp-attention, not added) decode at 43.6 ms a "
    "token at 4 in flight, slower than its MI300X runs, where the model predicts 10.6 ms: that release's DeepSeek "
    "path was slow on both vendors, so what is left of these runs' misses is that release as much as the part.",
    "- MLPerf Inference v5.1's audited Offline runs (the whole dataset at once, one engine a GPU): AMD's Mixtral-8x7B "
    "FP8 (MLP51A, vLLM 0.9 in process, FP8 K/V) is 1.06x optimistic on the MI325X and 1.14x on the MI300X, Red "
    "Hat's Llama-3.1-8B FP8 on one H100 (MLP51R, vLLM 0.10) 1.12x: tuned AMD runs at large batch sit where NVIDIA's "
    "do, so the MI300X tables hold there, and the cookbook's MI300X decode on SGLang 0.5.7 (2.8-3.1x optimistic on "
    "those tables at one request) is that release's kernels, which the sglang stack's slow_kernels carry, not the "
    "part. AMD's runs use vLLM's V0 engine (multi-step "
    "scheduling, chunked prefill off, which the commands give as --prefill-chunk 0), which the vllm stack (V1) does "
    "not describe; they are scored because at some 4,000 requests a step the GPU sets the time and the host's "
    "scheduling hides behind it, where dstack's V0 runs (DSTK, online at 4-128 in flight) are not: there the "
    "scheduling is the time. Scored or not, they would not move the headline's worst. HPE's TensorRT-LLM H200 run "
    "(MLP51H) is shown apart: no stack describes TensorRT-LLM (0.80x on the vllm stack).",
    "- GPUStack's Qwen3-8B on one H100 (GPS, its latency page; vLLM 0.11.0 and SGLang 0.5.3 at their default launches, "
    "100 ShareGPT conversations at 1-8 in flight) and the vLLM blog's FP8 K/V cache post (VKV; Llama-3.1-8B on one "
    "H100, 150 requests of about 20k / 2k tokens at 8 in flight, its BF16 and FP8 K/V rows), AR baselines added as published "
    "(nothing fitted on them): the bf16 runs' throughputs and TPOTs are within 1.08x (vLLM's throughput 1.00-1.07x "
    "optimistic, the TPOTs 0.98-1.01x; VKV's long-prompt throughput 1.05x pessimistic with a bf16 K/V cache, 1.06x optimistic with an FP8 one), the SGLang FP8 checkpoint's "
    "TPOT 1.06x and throughput 1.11x optimistic. The "
    "mean TTFTs are where they are off: vLLM's 59-75 ms for 233-token prompts is 3.95x optimistic at one request "
    "(1.85x at 8, the API servers shared by requests in flight) before the vllm stack's first-token dispatch delay, "
    "where SGLang's 27.7 ms at 4 in flight on the same GPU and prompts was met (1.03x pessimistic) while the sglang "
    "stack charged neither a first-token delay nor more than the decode-measured 28 us a layer of eager prefill "
    "dispatch; its median (27.3 ms) is 1.83x pessimistic now (50 ms predicted: 10.5 ms of eager prefill at 292 us a "
    "layer and 11.6 ms of first-token delay at 323 us a layer for Qwen3-8B's 36 layers, both measured at TP8, "
    "overshoot on one GPU; 2.13x, 58 ms, while the delay was DeepSeek-R1's 820 us a layer). On vLLM at one request "
    "the model's first token was 15 ms (a 10 ms prefill and the vllm stack's API server, 5 ms a request). The "
    "excess is nearly the same for every request, not prefill: the published median and p99 at one request are "
    "60.4 and 73.5 ms across ShareGPT prompts of very different lengths. NVIDIA's aiconfigurator adds 0.8 ms a model "
    "layer of host-side dispatch to every vLLM request's first token, calibrated on its own measured vLLM serving "
    "runs (none of these points); with it as the stack's first_token_us_per_layer (Qwen3-8B's 36 layers: 28.8 ms, "
    "a wait that holds neither the API server nor the GPU) the model's first token at one request is 43.7 ms and "
    "the median TTFTs are 1.38x, 1.34x and 1.03x optimistic at 1, 2 and 4 in flight and 1.23x pessimistic at 8 (the "
    "means 1.35x, 1.38x, 1.20x and 1.07x optimistic). The ~15 ms still "
    "missing at one request is most likely the chat path of vLLM's OpenAI server (chat template, tokenising, "
    "streaming: the page's client streams chat completions, and its TensorRT-LLM server takes 51.6 ms at 4 in "
    "flight); no published timing of that path at one request was found, so nothing is fitted here. The SGLang FP8 "
    "checkpoint's median TTFT (33.4 ms measured; 39.1 ms predicted, 1.17x pessimistic; the mean 39.7 ms, 1.01x, and "
    "1.44x optimistic without the delay) is slower than its bf16 one's, which the fp8 GEMM rate does not explain. VKV's median TTFT with 17k-23k-token prompts is 1.13x pessimistic (0.86 s predicted, 0.76 s "
    "measured): the stack prefills 8,192 tokens a step beside seven decodes, three steps a prompt. With every "
    "request the same 20,000 / 2,019 tokens it was 2.56x (1.96 s): the eight users' identical requests kept in "
    "lockstep, and the median refill waited behind another's prefill; the lengths `vllm bench serve` draws for the "
    "post's '±15% variance' (range ratio 0.15 at its default --seed 0, an assumption the published output total "
    "supports) spread them apart.",
    "- GPUStack's Qwen3 throughput pages on H100 (GPS; Qwen3-14B, Qwen3-32B and Qwen3-235B-A22B-Instruct-2507, the "
    "DeepSeek-R1 page's four random workloads, 32k / 100 to 128 / 4 tokens, every request sent at once; 20 runs, 60 "
    "scored numbers, nothing fitted): Qwen3-235B-A22B on vLLM 0.11.0 is met, bf16 at TP8 within 1.05x in throughput "
    "and median TTFT (mean TPOT 1.06-1.31x pessimistic) and the FP8 checkpoint at TP4 with a 16,384-token budget "
    "within 1.12x at 32k-2k prompts (TPOT 1.11-1.24x pessimistic). The dense models on one H100 run slower than "
    "predicted at every load: on vLLM 0.11.0 Qwen3-14B's throughput is 1.35-1.93x optimistic, its median TTFT "
    "1.32-2.13x and mean TPOT 1.35-1.39x, Qwen3-32B's 1.38-1.68x, 1.37-1.67x and 1.32-1.52x; Qwen3-14B-FP8 on "
    "SGLang 0.5.5.post1 1.48-1.93x in throughput and 1.46-2.02x in median TTFT, its mean TPOT 1.39-1.77x at 32k-2k "
    "(memory holds about 11 of the 32k requests, which run in waves, each wave's decodes waiting for its prefills). The "
    "32k prompts alone show it: 3.2M prompt tokens in 387 s on vLLM (8,270 a second for a 14.8B model) where the "
    "model prefills them about 1.3x faster, a gap the 235B runs on the same harness do not have. The 128 / 4 "
    "bursts' TPOTs: SGLang's 928 ms measured against 652 ms predicted (1.42x optimistic: SGLang runs the waiting "
    "prompts' prefills before the running decodes and, unless told, up to 2,048 requests at once, so each of a "
    "request's three gaps waits out part of the 1,000 prompts' prefill; with the decodes beside each budget and 256 "
    "at once, as the stack had them, 217 ms, 4.27x), and the 235B FP8 TP4 run's 125 ms against 62 ms (2.03x "
    "optimistic, throughput and median TTFT within 1.06x). That run is read with its prompts in vLLM's prefix "
    "cache (7 of a prompt's 8 blocks) because its own numbers rule out a cold prefill: the deployment's 2K run "
    "prefilled 18,000-20,500 tokens a second, so the burst's 125,650 cold prompt tokens would take 5.7-6.7 s of a "
    "run that ended at 6.11 s with its first tokens bunched at its end (median 5.53 s); the TP8 run of the same "
    "workload fits a cold prefill and is read so. Read cold, as until this version, the TPOT was 436 ms (3.49x "
    "pessimistic), the throughput 1.56x and the median TTFT 1.32x. The cached run's one pure-decode step of "
    "984 requests, 62 ms predicted, takes 125 ms measured: vLLM captures CUDA graphs up to 512 tokens a step, "
    "so that step runs without them, which the stack does not cost. Qwen3-32B's TensorRT-LLM launch (its optimized one) "
    "is left out: no stack describes TensorRT-LLM. The same lab's A100 pages (their vLLM 0.11.0 baselines on the A100 "
    "80GB SXM at vLLM's A100 defaults, 2,048 tokens a step and 256 requests at once; 12 runs, 36 scored numbers, "
    "nothing fitted) are within 1.01-1.57x: Qwen3-32B on one A100 within 1.07x in throughput and median TTFT at "
    "32k-2k prompts (mean TPOT 1.21x optimistic to 1.14x pessimistic), Qwen3-14B 1.07-1.18x optimistic there "
    "(TPOT 1.08-1.12x), the two 128 / 4 bursts 1.19-1.30x optimistic in throughput and 1.31-1.47x in median TTFT, "
    "and Qwen3-235B-A22B bf16 at "
    "TP8 slower than predicted at every load, 1.19-1.56x in throughput, 1.24-1.55x in median TTFT and 1.02-1.57x in "
    "mean TPOT, most with 32k prompts, where its H100 runs are met (the pages' TensorRT-LLM launches and the 235B's "
    "FP8 TP4 launch, weight-only FP8 Marlin kernels on Ampere, for which the A100 has no precision here, are left out).",
    "- vLLM PR #23151's baseline run (V23151; Qwen3-30B-A3B bf16 on one H100, TP1 EP1, vLLM's default launch of "
    "mid-August 2025, about v0.10.1, without the PR's tuned fused-MoE configs, which never landed; "
    "benchmark_serving.py's random 2,048 / 1,024 tokens, 100 prompts at 10 in flight; 4 numbers, nothing fitted): "
    "the median TTFT is 1.12x pessimistic (337 ms predicted, 300 ms measured) and the mean, not scored, 1.02x "
    "pessimistic (272 ms predicted, 267 ms measured; 38.4 ms of it the stack's first-token delay for the model's 48 "
    "layers, without which it would be about 233 ms, 1.15x optimistic), the mean TPOT 1.13x pessimistic (14.9 ms "
    "against 13.2 ms) and the output throughput 1.12x pessimistic (661 against 740 tok/s): the model's decode step "
    "at ten requests is slower than the measured one. The printed totals give one length a request (2,041.69 "
    "prompt and 1,015.76 answer tokens on average: no --ignore-eos, so a few answers stopped early), so the "
    "answers' spread is not modelled.",
    "- sglang-jax at concurrency 32 (1.36x pessimistic): the stack's per-request step cost is linear in the batch, "
    "fitted at 1 and 128; the measured step grows less than linearly below 128 (9.9 ms at 8, 11.3 at 32, 29.3 at 128).",
]


def render_headline(rs: list[dict], serving: list[dict]) -> list[str]:
    """The page's first section: the out-of-source error, the fitted numbers, the error bands."""
    h = headline(rs, serving)
    met = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    lines = [
        "## The headline: out of source",
        "",
        "Every free number of a stack or hardware file is fitted on named points (below). A point is *in source* when",
        "a number its prediction reads (its stack's and its GPU's fitted numbers) was fitted on a point from its own",
        "publication: it shares the setup, the harness and the choices the fit absorbed, so it cannot test the fit.",
        "A point that set a number, or an assumption of other points, is in sample (and in source): most serving",
        "sources do not publish their tokens per forward, so it is fitted at each curve's lowest load and the rest of",
        "the curve tests how the model scales with the load. The headline is taken on the other numbers only:",
        "single-stream times and serving metrics together, each an error max(predicted/measured, measured/predicted).",
        "",
        f"- **Out of source: median error {h['median_error']:.2f}x, worst {h['worst_error']:.2f}x** over {h['n']} numbers "
        f"from {len(h['origins'])} publications ({', '.join(h['origins'])}); targets: median <= "
        f"{TARGET_OUT_OF_SOURCE_MEDIAN}x ({met(h['median_met'])}), worst <= {TARGET_OUT_OF_SOURCE_WORST:g}x "
        f"({met(h['worst_met'])}). `tests/test_validation.py` fails when a met target is missed, and when an "
        f"unmet one grows past what it was when recorded: a median of {RECORDED_OUT_OF_SOURCE_MEDIAN:g}x, a worst "
        f"error of {RECORDED_OUT_OF_SOURCE_WORST:g}x.",
        f"- In source (not in the headline): {h['n_in_source']} numbers, listed in the tables with their publication.",
        f"- Configurations no stack describes (not in the headline, marked *not modelled* in the serving table with "
        f"what differs): {h['n_not_modelled']} numbers.",
        *([f"- Mean times to the first token of runs that also publish the median (not in the headline, which "
           f"scores the median; marked *mean: median scored* in the serving table): {h['n_tail']} numbers out of "
           f"source, median error {h['tail_median_error']:.2f}x, worst {h['tail_worst_error']:.2f}x. A mean over a "
           f"run's few requests is set by its slowest: the first requests after the server's launch (SGCM2's "
           f"one-request run: mean 4,529 ms, median 385 ms) and a first wave whose prompts no cache held, which the "
           f"publications do not say and the simulation does not guess."] if h["n_tail"] else []),
        "",
        "How much the headline rests on any one publication: the same figures with its numbers left out.",
        "",
        "| left out | its numbers | median error without them | worst without them |",
        "|---|---:|---:|---:|",
        *(f"| {origin} | {n} | {med:.2f}x | {worst:.2f}x |" for origin, n, med, worst in without_each_publication(rs, serving)),
        "",
        "### Fitted numbers and the points they were fitted on",
        "",
        "| file | field | fitted on | publication |",
        "|---|---|---|---|",
    ]
    where = origins()
    for n in fitted_numbers():
        pubs = ", ".join(sorted({where[pid] for pid in n["points"]}))
        lines.append(f"| {n['kind']} {n['name']} | `{n['field']}` | {', '.join(n['points'])} | {pubs} |")
    bands = error_bands(rs, serving)
    lines += [
        "",
        "### Error bands: what `serve` and `plan` print as intervals",
        "",
        "Per stack, the 10th, 50th and 90th percentiles of predicted speed / measured speed (above 1: the prediction",
        "is optimistic) over its out-of-source numbers, in two bands. The speed band is taken over throughputs,",
        "end-to-end times and times per pass, what the step times set; a stack with fewer than "
        f"{BAND_MIN_NUMBERS} of them takes the",
        "band of all stacks together. The first-token band is taken over the times to the first token (a speed being",
        "1 / TTFT): a fixed cost per request that no step time describes moves them alone, so their errors do not",
        "widen every other interval. A stack with fewer than "
        f"{BAND_MIN_NUMBERS} first-token numbers of its own takes every stack's",
        f"first-token band; with fewer than {BAND_MIN_NUMBERS} of those too, its band over all its numbers,",
        "first-token ones included (its speed band, where it has none), and with fewer than "
        f"{BAND_MIN_NUMBERS} numbers in all,",
        "every stack's band over all theirs.",
        "`serve` and `plan` divide a predicted throughput by the speed band's high and low ends to bracket it (and",
        "multiply times and costs); a time to the first token at each end is scaled further by the first-token",
        "band's end over the speed band's, so that at light load it moves by the first-token band alone. An interval",
        "is as wide as the tool's measured error, not a typed-in margin.",
        "Written to `dlmcost/inputs/error_bands.json`, which the commands read. A stack `dlmcost calibrate` fitted to",
        "your own measurements carries a speed band of its own instead, its held-out error over them",
        "([stacks.md](stacks.md#calibrating-a-stack-to-your-measurements)), and keeps its published first-token band's",
        "excess over the speed band on it ([methodology.md](methodology.md#error-bands-and-intervals)).",
        "",
        "Per vendor too, where more than one vendor's parts have "
        f"{BAND_MIN_NUMBERS} speed numbers: the same engine runs other kernels",
        "on another runtime on each vendor's parts (CUDA, ROCm), so one vendor's errors say little about another's,",
        "and a deployment takes its stack's band on its GPU's vendor's parts (the rows 'on VENDOR parts' below): the",
        f"stack's own numbers there with {BAND_MIN_NUMBERS} or more, else every stack's there; its first-token band",
        "likewise. A vendor without such a band (a TPU, a Trainium) takes the stack's band on every vendor's parts.",
        "",
        "| stack | p10 | median | p90 | numbers | basis | first token: p10 | median | p90 | numbers | basis |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, entry in bands.items():
        for label, b in [(name, entry), *((f"{name} on {v['vendor']} parts", v)
                                          for v in (entry.get("vendors") or {}).values())]:
            f = b["first_token"]
            lines.append(f"| {label} | {b['low']:.2f} | {b['median']:.2f} | {b['high']:.2f} | {b['numbers']} "
                         f"| {b['basis']} | {f['low']:.2f} | {f['median']:.2f} | {f['high']:.2f} | {f['numbers']} "
                         f"| {f['basis']} |")
    return lines + [""]


def render(rs: list[dict], serving: list[dict] | None = None) -> str:
    if serving is not None and any("in_source" not in r for r in (*rs, *serving)):
        mark_sources(rs, serving)
    s = summary(rs)
    lines = [
        "# Validation: predicted vs published measurements",
        "",
        "Generated by `python scripts/validation.py` from `validation/published.yaml` and `validation/serving.yaml`;",
        "do not edit by hand.",
        "",
        *(render_headline(rs, serving) if serving is not None else []),
        "## Single stream: time per forward pass",
        "",
        f"{s['n']} published measurements, {len(s['stacks'])} software stacks ({', '.join(s['stacks'])}), "
        f"GPUs: {', '.join(s['gpus'])}.",
        "Each case is predicted with its stack (`--stack`, see [stacks.md](stacks.md)) and, for comparison,",
        "with the hardware roofline alone (the `realistic` efficiency profile, no stack).",
        "Error = max(predicted/measured, measured/predicted) of the time per forward pass. Measured time per",
        "forward = 1000 x tokens per forward / tokens/s; where a source counts tokens/s up to end-of-sequence",
        "(`answer tokens`), it is the generation's time (batch x answer tokens / tokens/s) over its passes.",
        "",
        f"- With the matching stack: median error {s['median_error']:.2f}x, worst {s['worst_error']:.2f}x "
        f"(median predicted/measured {s['median_ratio']:.2f}); in sample and in source included.",
        f"- Roofline alone: median error {s['roofline_median_error']:.2f}x, worst {s['roofline_worst_error']:.2f}x.",
        "",
        "| case | from | kind | stack | GPU | measured ms/fwd | predicted ms/fwd | roofline ms/fwd | measured tok/s | predicted tok/s | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rs:
        p = r["point"]
        tag = " *(in source)*" if r.get("in_source") else ""
        lines.append(f"| {p.id}{tag} | {p.origin} | {p.case} | {r['stack']} | {r['gpu']} | {r['measured_ms']:.2f} | "
                     f"{r['predicted_ms']:.2f} | {r['roofline_ms']:.2f} | {r['measured_tokens_per_s']:.1f} | "
                     f"{r['predicted_tokens_per_s']:.1f} | {r['error']:.2f}x |")
    lines += ["", "## Sources and settings", ""]
    for r in rs:
        p = r["point"]
        wl = ", ".join(f"{k}={v}" for k, v in p.workload.items())
        lines.append(f"- **{p.id}**: {p.source}. Model `{p.model}`, GPU `{p.gpu}`, {wl}"
                     f"{', tokens per forward ' + format(p.tokens_per_forward, 'g') if p.tokens_per_forward != 1 else ''}"
                     f"{', ' + format(p.answer_tokens, 'g') + ' answer tokens (tokens/s counted up to EOS)' if p.answer_tokens else ''}. "
                     f"Assumes: {p.assumes}.")
    if serving is not None:
        lines += ["", *render_serving(serving)]
    lines += ["", "## Measured on our own GPU", "",
              "None measured in this release: no GPU was available to us, so no row here comes from "
              "`dlmcost measure`; every row above is a published measurement."]
    import cogdocs

    text, code = cogdocs.output(EXAMPLE)
    assert code == 0, text
    lines += [
        "",
        "## Reproducing a row",
        "",
        "`fastdllm-llada-prefix-cache-a100` with the CLI: time per forward = latency / NFE (here 256 passes);",
        "the published 21.2 tokens/s counts 160 answer tokens, i.e. 160 / 21.2 = 7.5 s for the generation.",
        "",
        f'<!-- [[[cog run("{EXAMPLE}") ]]] -->',
        f"```text\n$ {EXAMPLE}\n{text}\n```",
        "<!-- [[[end]]] -->",
    ]
    lines += [
        "",
        "Source keys: see the header of `validation/published.yaml` (gpt-fast README tables; hao-ai-lab/d3LLM",
        "README SGLang and Hugging Face backend tables; Fast-dLLM paper, arXiv 2505.22618, Table 1).",
        "",
    ]
    return "\n".join(lines)


def bands_text(rs: list[dict], serving: list[dict]) -> str:
    """dlmcost/inputs/error_bands.json as this validation computes it."""
    doc = dict(generated_by="scripts/validation.py", what=(
        "per stack: 10th/50th/90th percentiles of predicted speed / measured speed over the out-of-source "
        "validation numbers (docs/validation.md): the speed band, and the first-token band (first_token)"), bands=error_bands(rs, serving))
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    rs, serving = rows(), serving_rows()
    mark_sources(rs, serving)
    text, bands = render(rs, serving), bands_text(rs, serving)
    if "--check" in argv:
        current = PAGE.exists() and PAGE.read_text(encoding="utf-8") == text
        return 0 if current and BANDS.exists() and BANDS.read_text(encoding="utf-8") == bands else 1
    PAGE.write_text(text, encoding="utf-8")
    BANDS.write_text(bands, encoding="utf-8")
    h = headline(rs, serving)
    print(f"out of source: {h['n']} numbers, median {h['median_error']:.2f}x, worst {h['worst_error']:.2f}x")
    s, v = summary(rs), serving_summary(serving)
    print(f"{PAGE.relative_to(ROOT)}: {s['n']} cases, median error {s['median_error']:.2f}x, worst {s['worst_error']:.2f}x; "
          f"serving: {v['n']} numbers, median {v['median_error']:.2f}x, worst {v['worst_error']:.2f}x, at c >= 8 "
          f"median {v['heavy_median_error']:.2f}x, worst {v['heavy_worst_error']:.2f}x, batch >= 32 at most "
          f"{v['big_optimism']:.2f}x optimistic")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
