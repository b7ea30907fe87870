"""What plan and serve read off the cost engine per request class (serving/steptime.py): the passes
until the first streamed output, and the pass table's first pass and mean later pass, each against
numbers worked by hand or read from `analyze`'s own pass breakdown."""

from __future__ import annotations

import pytest

from dlmcost import api
from dlmcost.serving.steptime import Decoding, pass_table, passes_to_first_output

pytestmark = pytest.mark.usefixtures("bundled_offline")

BLOCK = Decoding("block", 32, 2.0)
AR = Decoding("ar", None, 1.0)


def test_passes_to_the_first_block_by_hand():
    """P + (NFE - P) / (canvas / block), rounded up: 8 + 34 / 2 = 25 exactly; 1 + 49 / 3 = 17.3
    passes end inside the 18th (never rounded to the nearest, 17); a one-block canvas of 10.4
    passes is capped at the request's 10 (1..NFE)."""
    assert passes_to_first_output(BLOCK, 42, 8, 64) == 25
    assert passes_to_first_output(BLOCK, 50, 1, 96) == 18
    assert passes_to_first_output(BLOCK, 10.4, 0, 32) == 10


def test_passes_to_the_first_token_by_hand():
    """A token-streaming scheme: its prompt's pass yields the first token; without a prompt, the
    passes that yield one token (NFE / canvas: 2 for 200 passes over 100 tokens), at least one."""
    assert passes_to_first_output(AR, 65, 1, 64) == 1
    assert passes_to_first_output(AR, 200, 0, 100) == 2
    assert passes_to_first_output(AR, 50, 0, 100) == 1


def test_the_pass_table_s_first_and_later_passes_are_analyze_s():
    """Qwen2.5-7B on an H100, a 64-token prompt, batch 1: the first pass is analyze's prefill and
    the later passes' mean is its decode step, also for an answer of two tokens (two passes, the
    prefill sampling the first token: the later one is the step, not the prefill again). What it pins is which pass is which (the pass
    times themselves are pinned by hand in the cost engine's tests), so it reads them from analyze."""
    pt = pass_table("Qwen/Qwen2.5-7B", AR, ["H100 SXM"], ["bf16"], [1], [64], [2, 3], [1])
    for k, gen in enumerate((2, 3)):
        r = api.analyze("Qwen/Qwen2.5-7B", "h100", scheme="ar", prompt=64, gen=gen, batch=1)["results"][0]
        passes = {p["name"]: p for p in r.model_dump()["passes"]}
        assert pt.nfe[0, 0, 0, 0, k] == r.nfe == 1 + (gen - 1)
        assert pt.first_s[0, 0, 0, 0, k, 0] == pytest.approx(passes["prefill"]["time_s"], rel=1e-9)
        assert pt.pass_s[0, 0, 0, 0, k, 0] == pytest.approx(passes["step"]["time_s"], rel=1e-9)


def test_an_fp8_kv_cache_halves_a_long_context_decode_step_s_kv_reads():
    """Qwen2.5-7B's decode step at batch 16 over a 16,384-token prompt (its one step after the
    prefill reads the prompt's K/V and the first answer token's: 16,385 tokens): an fp8 cache reads
    1 byte an element where bf16 reads 2, and the step is shorter by the bytes saved over the H100's
    decode-attention bandwidth (0.8 x 3.35 TB/s, its hardware file): 16 x 2 (K and V) x 28 layers x
    4 K/V heads x 128 x 16,385 bytes. The prefill, compute-bound at 16 x 16,384 tokens, takes the
    same time either way."""
    tables = {kv: pass_table("Qwen/Qwen2.5-7B", AR, ["H100 SXM"], ["bf16"], [1], [16384], [2], [16], kv_dtype=kv)
              for kv in ("bf16", "fp8")}
    saved_bytes = 16 * 2 * 28 * 4 * 128 * 16385 * (2 - 1)
    step = {kv: t.pass_s[0, 0, 0, 0, 0, 0] for kv, t in tables.items()}
    assert step["bf16"] - step["fp8"] == pytest.approx(saved_bytes / (0.8 * 3.35e12), rel=1e-6)
    assert tables["fp8"].first_s[0, 0, 0, 0, 0, 0] == pytest.approx(tables["bf16"].first_s[0, 0, 0, 0, 0, 0], rel=1e-12)
