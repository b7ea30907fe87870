"""The scheme registry and the three schemes from the recent literature, against pass lists
written out by hand from their documented definitions (docs/methodology.md, "Schemes").

Each expected total is the sum, over the hand-written passes, of the per-op costs of one pass
(cost.pass_ops, pinned on its own in test_cost.py), so a test fails if a scheme builds the wrong
passes or the engine adds them up wrongly."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlmcost import api
from dlmcost.errors import UsageError, WorkloadError
from dlmcost.inputs.models import load_bundled
from dlmcost.engine.schemes import REGISTRY, SCHEMES
from dlmcost.engine.workload import Workload

import passlist  # noqa: E402  (tests/passlist.py)

LLADA = "GSAI-ML/LLaDA-8B-Instruct"
BYTES = ("weight_bytes", "kv_read_bytes", "kv_write_bytes", "activation_bytes")


def check(result, passes, models):
    """passes: (role, q, c, kv_write, logits, causal, count), role naming a model in `models`."""
    passlist.check(result, [(models[role], *rest) for role, *rest in passes])


def analyze(model=LLADA, **w):
    return api.analyze(model, "h100", **w)["results"][0]


# --- the registry -------------------------------------------------------------------------------


def test_registry_is_the_single_list_of_schemes():
    assert SCHEMES == ("ar", "mdm", "prefix-cache", "dual-cache", "block", "multi-block", "windowed-refresh",
                       "draft-verify", "diffgemma")
    assert set(Workload.model_fields["scheme"].annotation.__args__) == set(SCHEMES)
    for s in REGISTRY.values():
        assert s.summary and set(s.knobs) <= {"steps", "block", "store_pass", "active_blocks", "cache_delay",
                                              "refresh_every", "window"}


def test_unknown_scheme_is_refused_with_the_registry_list():
    with pytest.raises(UsageError, match="multi-block"):
        api.analyze(LLADA, "h100", scheme="nope")
    with pytest.raises(UsageError, match="draft-verify"):
        api.sweep(LLADA, gpus="h100", schemes=["nope"])


def test_sweep_evaluates_a_scheme_once_per_knob_it_ignores():
    res = api.sweep(LLADA, gpus="h100", schemes=["mdm", "multi-block", "draft-verify"], blocks=[16, 32], gens=[128])
    counts = {}
    for row in api.sweep_rows(res):
        counts[row["scheme"]] = counts.get(row["scheme"], 0) + 1
    assert counts == {"mdm": 1, "multi-block": 2, "draft-verify": 2}


# --- multi-block --------------------------------------------------------------------------------


def test_multi_block_pass_list_by_hand():
    """Lp 100, Lg 128, b 32 (4 blocks), S 32 (8 passes per block), A 2, d 1: the window holds
    2 + 1/8 blocks = 68 tokens; it is full at positions 0 and 1 and drains at 2 and 3."""
    m = load_bundled(LLADA)
    r = analyze(scheme="multi-block", prompt=100, gen=128, block=32, steps=32, active_blocks=2, cache_delay=1)
    kvw = 32 / 8
    passes = [("main", 100, 0, 100, 0, False, 1),
              ("main", 68, 100, kvw, 68, False, 8), ("main", 68, 132, kvw, 68, False, 8),
              ("main", 64, 164, kvw, 64, False, 8), ("main", 32, 196, kvw, 32, False, 8)]
    check(r, passes, {"main": m})
    names = {p["name"]: p for p in r["passes"]}
    assert (names["step"]["q"], names["step"]["c_last"]) == (68, 132)
    assert (names["tail"]["q"], names["tail"]["q_last"], names["tail"]["c_last"]) == (64, 32, 196)


def test_multi_block_refresh_every_r_passes():
    """R = 4: 8 of the 32 passes are full refreshes (228 tokens, writing the prompt and on
    average half of the generation but a block); the other 24 leave 6 per window position."""
    m = load_bundled(LLADA)
    r = analyze(scheme="multi-block", prompt=100, gen=128, block=32, steps=32, active_blocks=2, cache_delay=1,
                refresh_every=4)
    q = 32 * (2 + 1 / 6)
    kvw = 32 / 6
    passes = [("main", 100, 0, 100, 0, False, 1), ("main", 228, 0, 100 + 48, 228, False, 8),
              ("main", q, 100, kvw, q, False, 6), ("main", q, 132, kvw, q, False, 6),
              ("main", 64, 164, kvw, 64, False, 6), ("main", 32, 196, kvw, 32, False, 6)]
    check(r, passes, {"main": m})


def test_multi_block_without_a_cache_is_the_full_canvas_every_pass():
    m = load_bundled(LLADA)
    r = analyze(scheme="multi-block", prompt=100, gen=128, block=32, steps=32, refresh_every=1)
    check(r, [("main", 228, 0, 0, 228, False, 32)], {"main": m})
    assert r["memory"]["kv_cache_bytes"] == 0
    mdm = analyze(scheme="mdm", prompt=100, gen=128, steps=32)
    assert r["flops"] == pytest.approx(mdm["flops"], rel=1e-12)


def test_multi_block_refreshes_leaving_less_than_one_cached_pass_per_position():
    """Lp 100, Lg 128, b 32 (4 blocks), S 6, R 2: 3 full refreshes, the other 3 passes spread as
    s = 3/4 of a pass per window position, so a block waits d/s = 4/3 positions for the cache:
    the window holds 2 + 4/3 blocks (106.7 tokens), full at position 0 only, and each position
    writes a block's K/V in 3/4 of a pass (42.7 tokens a pass)."""
    m = load_bundled(LLADA)
    r = analyze(scheme="multi-block", prompt=100, gen=128, block=32, steps=6, active_blocks=2, cache_delay=1,
                refresh_every=2)
    q, kvw, s = 32 * (2 + 4 / 3), 32 / 0.75, 0.75
    passes = [("main", 100, 0, 100, 0, False, 1), ("main", 228, 0, 100 + 3 * 32 / 2, 228, False, 3),
              ("main", q, 100, kvw, q, False, s)]
    passes += [("main", 96 - 32 * i, 132 + 32 * i, kvw, 96 - 32 * i, False, s) for i in range(3)]
    check(r, passes, {"main": m})


def test_multi_block_with_many_blocks_in_flight_is_prefix_cache_like():
    """A window wider than the generation covers every block left: q = Lg - i*b, as the prefix
    cache's steps (without their refresh passes)."""
    m = load_bundled(LLADA)
    r = analyze(scheme="multi-block", prompt=64, gen=128, block=32, steps=16, active_blocks=8, cache_delay=0)
    passes = [("main", 64, 0, 64, 0, False, 1)] + [("main", 128 - 32 * i, 64 + 32 * i, 8, 128 - 32 * i, False, 4)
                                                   for i in range(4)]
    check(r, passes, {"main": m})


def test_multi_block_moe_sums_pass_by_pass():
    """LLaDA2.0-mini's experts touched change with q in the draining window: not affine, summed
    pass by pass, and still equal to the hand-written list."""
    m = load_bundled("inclusionAI/LLaDA2.0-mini")
    r = analyze("inclusionAI/LLaDA2.0-mini", scheme="multi-block", prompt=16, gen=64, block=8, steps=16,
                active_blocks=3, cache_delay=0)
    passes = [("main", 16, 0, 16, 0, False, 1)]
    for i in range(8):
        q = 8 * min(3, 8 - i)
        passes.append(("main", q, 16 + 8 * i, 4, q, False, 2))
    check(r, passes, {"main": m})


# --- windowed-refresh ---------------------------------------------------------------------------


def test_windowed_refresh_pass_list_by_hand():
    """Per block: one full refresh (writing everything but the block), then 7 steps over the
    block and 16 tokens either side (64 tokens) with logits for the block."""
    m = load_bundled(LLADA)
    r = analyze(scheme="windowed-refresh", prompt=100, gen=128, block=32, steps=32, window=16)
    passes = [("main", 228, 0, 196, 228, False, 4), ("main", 64, 164, 0, 32, False, 28)]
    check(r, passes, {"main": m})


def test_windowed_refresh_every_r_steps_and_a_window_wider_than_the_canvas():
    m = load_bundled(LLADA)
    r = analyze(scheme="windowed-refresh", prompt=100, gen=128, block=32, steps=32, window=16, refresh_every=3)
    # 7 later steps per block: floor(7/3) = 2 of them are full refreshes
    check(r, [("main", 228, 0, 196, 228, False, 12), ("main", 64, 164, 0, 32, False, 20)], {"main": m})
    wide = analyze(scheme="windowed-refresh", prompt=100, gen=128, block=32, steps=32, window=1000)
    check(wide, [("main", 228, 0, 196, 228, False, 4), ("main", 228, 0, 0, 32, False, 28)], {"main": m})


def test_windowed_refresh_every_step_is_a_full_refresh_when_r_is_1():
    """R = 1: each of a block's 7 later steps is a full refresh too: 32 full passes, no windowed ones."""
    r = analyze(scheme="windowed-refresh", prompt=100, gen=128, block=32, steps=32, window=16, refresh_every=1)
    check(r, [("main", 228, 0, 196, 228, False, 32)], {"main": load_bundled(LLADA)})


# --- draft-verify -------------------------------------------------------------------------------


def test_draft_verify_self_speculative_by_hand():
    """k = 16 drafts, 4 tokens added per verify pass (accepted drafts and the bonus token), a
    129-token answer: the prefill's logits give token 0, so the verify passes add the other 128 in
    128 / 4 = 32 iterations, each one causal pass over the 16 drafts being verified and 16 mask
    slots, over the prompt and the tokens added so far: NFE 33, not 1 + 129 / 4."""
    m = load_bundled(LLADA)
    r = analyze(scheme="draft-verify", prompt=100, gen=129, block=16, tpf=4)
    passes = [("main", 100, 0, 100, 1, True, 1)] + [("main", 32, 100 + 4 * j, 4, 32, True, 1) for j in range(32)]
    check(r, passes, {"main": m})
    assert r["nfe"] == 33
    assert r["tokens_per_nfe"] == pytest.approx(129 / 33)


def test_draft_verify_fractional_acceptance_keeps_nfe_exact():
    """3 tokens a verify pass, 128 answer tokens: 127 / 3 = 42.33 iterations after the prefill's
    token, over 43 shapes whose context grows by 127 / 43, each run 42.33 / 43 times."""
    m = load_bundled(LLADA)
    r = analyze(scheme="draft-verify", prompt=10, gen=128, block=16, tpf=3)
    iterations = 127 / 3
    passes = [("main", 10, 0, 10, 1, True, 1)] + [("main", 32, 10 + 127 / 43 * j, 3, 32, True, iterations / 43)
                                                  for j in range(43)]
    check(r, passes, {"main": m})
    assert r["nfe"] == pytest.approx(1 + 127 / 3)


def test_draft_verify_without_a_prompt_verifies_every_token():
    """No prompt, no prefill: the verify passes add all 128 tokens, 4 a pass: 32 iterations over
    c = 4j (the first drafts from nothing cached)."""
    r = analyze(scheme="draft-verify", prompt=0, gen=128, block=16, tpf=4)
    check(r, [("main", 32, 4 * j, 4, 32, True, 1) for j in range(32)], {"main": load_bundled(LLADA)})
    assert r["nfe"] == 32


def test_draft_verify_with_a_drafter_model():
    """A drafter (here Dream-7B, same vocabulary as Qwen2.5-7B) drafts 16 tokens bidirectionally;
    the verifier checks 16 + 1 causally. Both prefill the prompt (the drafter, a diffusion model,
    bidirectionally, without logits); both models are resident. 129 tokens, 4 a verify pass: the
    prefill's token and 128 / 4 = 32 draft-and-verify iterations."""
    verifier, drafter = load_bundled("Qwen/Qwen2.5-7B"), load_bundled("Dream-org/Dream-v0-Instruct-7B")
    r = analyze("Qwen/Qwen2.5-7B", scheme="draft-verify", prompt=100, gen=129, block=16, tpf=4,
                drafter="Dream-org/Dream-v0-Instruct-7B")
    passes = [("main", 100, 0, 100, 1, True, 1), ("drafter", 100, 0, 100, 0, False, 1)]
    for j in range(32):
        passes += [("drafter", 16, 100 + 4 * j, 4, 16, False, 1), ("main", 17, 100 + 4 * j, 4, 17, True, 1)]
    check(r, passes, {"main": verifier, "drafter": drafter})
    assert [p["name"] for p in r["passes"]] == ["prefill", "draft-prefill", "draft", "verify"]
    assert r["memory"]["weights_bytes"] == 2 * (verifier.params_total + drafter.params_total)


def test_draft_verify_with_fewer_iterations_than_one():
    """Lg 4 at 4 tokens a verify pass: the prefill gives token 0, the other 3 take 3/4 of an
    iteration, one shape run 0.75 times (a verify pass of 2 x 4 positions over the prompt)."""
    r = analyze(scheme="draft-verify", prompt=10, gen=4, block=4, tpf=4)
    check(r, [("main", 10, 0, 10, 1, True, 1), ("main", 8, 10, 4, 8, True, 0.75)], {"main": load_bundled(LLADA)})


def test_prompts_of_one_token_are_prefilled():
    """A one-token prompt is a prompt: its prefill samples the first answer token (ar: 7 decode
    steps for 8 tokens; draft-verify: 8 tokens, 4 a pass, 2 iterations; the drafter prefills it
    too); multi-block prefills it before its first window. Without a prompt, a drafter has nothing
    to prefill."""
    m = load_bundled(LLADA)
    ar = analyze(scheme="ar", prompt=1, gen=8)
    check(ar, [("main", 1, 0, 1, 1, True, 1)] + [("main", 1, 1 + j, 1, 1, True, 1) for j in range(7)], {"main": m})
    mb = analyze(scheme="multi-block", prompt=1, gen=64, block=32, steps=16, active_blocks=2, cache_delay=0)
    check(mb, [("main", 1, 0, 1, 0, False, 1), ("main", 64, 1, 4, 64, False, 8), ("main", 32, 33, 4, 32, False, 8)],
          {"main": m})
    models = {"main": load_bundled("Qwen/Qwen2.5-7B"), "drafter": load_bundled("Dream-org/Dream-v0-Instruct-7B")}
    for prompt, produced in ((1, 8), (0, 9)):
        r = analyze("Qwen/Qwen2.5-7B", scheme="draft-verify", prompt=prompt, gen=9, block=4, tpf=4.5,
                    drafter="Dream-org/Dream-v0-Instruct-7B")
        iterations = produced / 4.5
        passes = [("main", 1, 0, 1, 1, True, 1), ("drafter", 1, 0, 1, 0, False, 1)] if prompt else []
        for j in range(2):
            passes += [("drafter", 4, prompt + produced / 2 * j, 4.5, 4, False, iterations / 2),
                       ("main", 5, prompt + produced / 2 * j, 4.5, 5, True, iterations / 2)]
        check(r, passes, models)


def test_draft_verify_refuses_impossible_acceptance_and_foreign_drafters():
    with pytest.raises(WorkloadError, match="drafts plus one"):
        api.analyze(LLADA, "h100", scheme="draft-verify", gen=128, block=4, tpf=8)
    with pytest.raises(WorkloadError, match="vocabulary"):
        api.analyze(LLADA, "h100", scheme="draft-verify", gen=128, tpf=4, drafter="Qwen/Qwen2.5-7B")
    with pytest.raises(UsageError, match="draft-verify"):
        api.analyze(LLADA, "h100", scheme="mdm", drafter="Qwen/Qwen2.5-7B")


def test_tri_mode_model_runs_ar_block_and_draft_verify_on_one_config():
    """One set of weights decoded three ways (autoregressive, block diffusion, self-speculative):
    the same config planned by three schemes."""
    times = {s: analyze("JetLM/SDAR-4B-Chat", scheme=s, prompt=256, gen=256, block=16,
                        **({"tpf": 6} if s == "draft-verify" else {}))["time_s"] for s in ("ar", "block", "draft-verify")}
    assert times["draft-verify"] < times["ar"]


# --- memory's peak shapes come from the families -----------------------------------------------


@pytest.mark.parametrize("scheme,q_max", [("ar", 100), ("mdm", 228), ("prefix-cache", 228), ("dual-cache", 228),
                                          ("block", 100), ("multi-block", 228), ("windowed-refresh", 228),
                                          ("draft-verify", 100)])
def test_peak_activations_follow_the_largest_pass(scheme, q_max):
    m = load_bundled(LLADA)
    kw = dict(refresh_every=4) if scheme == "multi-block" else {}
    r = analyze(scheme=scheme, prompt=100, gen=128, block=32, steps=32, **kw)
    widest = max((m.n_heads + 2 * m.n_kv_heads) * m.head_dim, 3 * m.ffn_dim)
    assert r["memory"]["activation_bytes"] == pytest.approx(q_max * (2 * m.d_model + widest) * 2)


def _knobs(**given):
    from dlmcost.engine.workload import make_knobs

    cols = dict(prompt=8.0, gen=16.0, steps=4.0, block=4.0, store_pass=False, logits_committed=False,
                active_blocks=1.0, cache_delay=0.0, refresh_every=0.0, window=0.0, drafter=False)
    return make_knobs(**{**cols, **given})


def test_a_family_that_repeats_zero_times_has_no_passes():
    """`family` sets n = 0 where r is not positive (its docstring), so such a family adds neither
    passes nor a peak shape: n = 3 shapes of q = 5 repeated r = 2, 0 and -1 times give n 3, 0, 0,
    3 x 2 = 6 passes then none, and a peak q of 5 then 0."""
    from dlmcost.engine.schemes import peak_shape
    from dlmcost.engine.schemes.base import family

    f = family("x", _knobs(prompt=[8.0, 8.0, 8.0]), n=3.0, r=[2.0, 0.0, -1.0], q=5.0)
    assert f.n.tolist() == [3.0, 0.0, 0.0]
    assert f.count.tolist() == [6.0, 0.0, 0.0]
    assert [a.tolist() for a in peak_shape([f])] == [[5.0, 0.0, 0.0], [5.0, 0.0, 0.0]]


def test_peak_shape_of_families_by_hand():
    """Memory's largest q and logit positions, per configuration, families written by hand. First
    configuration: A runs 3 shapes q = 2, 7, 12 (2 + 5j) with logits 1, 2, 3; B one shape of q 4
    (its step of 30 a pass never taken: j stops at n - 1 = 0), logits defaulting to q; C runs none
    (n 0) so its q of 50 does not count: q 12, logits 4. Second configuration: no family runs, so
    the peak is 0, not a floor of one token."""
    from dlmcost.engine.schemes import peak_shape
    from dlmcost.engine.schemes.base import family

    k = _knobs(prompt=[8.0, 8.0])
    a = family("a", k, n=[3.0, 0.0], q=2.0, dq=5.0, logits=1.0, dlogits=1.0)
    b = family("b", k, n=[1.0, 0.0], q=4.0, dq=30.0)
    c = family("c", k, n=0.0, q=50.0)
    q_max, logits_max = peak_shape([a, b, c])
    assert q_max.tolist() == [12.0, 0.0]
    assert logits_max.tolist() == [4.0, 0.0]


def test_later_peak_q_and_prompt_passes_of_ar_by_hand():
    """AR's passes written out: with a one-token prompt and a one-token answer the prefill (q 1,
    nothing cached) samples the only token and no decode step runs, so a running sequence adds 0
    queries to a later step and one pass sees only the prompt; with 5 answer tokens, 4 decode steps
    of q 1 follow it; without a prompt the 5 steps (q 1 over 0, 1, .. cached tokens) are all later
    passes and none is a prefill. Also with an 8-token prompt and one answer token (the prefill
    alone again). A one-token prompt's prefill is still a prefill, not a later pass of q 1."""
    from dlmcost.engine.schemes import later_peak_q, prompt_passes

    k = _knobs(prompt=[1.0, 1.0, 0.0, 8.0], gen=[1.0, 5.0, 5.0, 1.0])
    families = REGISTRY["ar"].passes(k)
    assert later_peak_q(families, k).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert prompt_passes(families, k).tolist() == [1.0, 1.0, 0.0, 1.0]


def test_later_peak_q_of_a_single_growing_pass_is_its_first():
    """A family of one shape (n 1) from q 2 growing 3 a pass runs only j = 0: a later q of 2, not
    2 + 3 (prompt 8, nothing cached, so not a prefill)."""
    from dlmcost.engine.schemes import later_peak_q
    from dlmcost.engine.schemes.base import family

    k = _knobs()
    assert later_peak_q([family("f", k, n=1.0, q=2.0, dq=3.0, c=8.0)], k).tolist() == [2.0]


# --- useful tokens (--answer-tokens) ------------------------------------------------------------


def test_answer_tokens_stop_after_the_eos_block_or_pay_the_whole_canvas():
    """A 40-token answer in a 256-token generation: block diffusion (b = 32) stops after the
    second block, AR after the 40th token, vanilla masked diffusion still runs every position."""
    base = dict(prompt=256, gen=256, block=32)
    block = analyze(scheme="block", answer_tokens=40, **base)
    assert block["nfe"] == 1 + 64  # prefill + 2 blocks x 32 steps
    short = analyze(scheme="block", prompt=256, gen=64, block=32, steps=64)
    assert block["time_s"] == pytest.approx(short["time_s"], rel=1e-12)
    assert block["tokens_per_s"] == pytest.approx(40 / block["time_s"])
    ar40 = analyze(scheme="ar", prompt=256, gen=40)
    assert block["ar_time_s"] == pytest.approx(ar40["time_s"], rel=1e-12)
    mdm, mdm_all = analyze(scheme="mdm", answer_tokens=40, **base), analyze(scheme="mdm", **base)
    assert mdm["time_s"] == pytest.approx(mdm_all["time_s"], rel=1e-12)
    assert mdm["tokens_per_s"] == pytest.approx(mdm_all["tokens_per_s"] * 40 / 256)
    with pytest.raises(UsageError, match="longer than the generation"):
        analyze(scheme="block", answer_tokens=300, **base)


def test_sweep_answer_tokens_match_analyze():
    res = api.sweep(LLADA, gpus="h100", schemes=["block", "draft-verify"], gens=[128, 256], blocks=[32],
                    answer_tokens=100, tpf=4)
    for row in api.sweep_rows(res):
        r = analyze(scheme=row["scheme"], gen=row["gen"], block=32, tpf=4, answer_tokens=100)
        assert row["time_s"] == pytest.approx(r["time_s"], rel=1e-12)
        assert row["tokens_per_s"] == pytest.approx(r["tokens_per_s"], rel=1e-12)


@pytest.mark.parametrize("name", [s for s in REGISTRY if s not in ("ar", "mdm", "prefix-cache", "dual-cache", "block",
                                                                   "diffgemma")])
def test_a_model_file_may_default_to_any_registered_scheme(tmp_path, name):
    """The sampler's scheme is checked against the registry, not a hand-written list (which
    refused a model file defaulting to multi-block with exit 7)."""
    from dlmcost.cli import main

    text = (Path(__file__).resolve().parents[1] / "examples" / "tiny-dlm.yaml").read_text()
    model = tmp_path / "m.yaml"
    model.write_text(text.replace("scheme: block", f"scheme: {name}").replace("schemes: [block, ar]",
                                                                                f"schemes: [{name}, ar]"))
    assert main(["model", str(model), "-f", "json"]) == 0


def test_a_model_file_naming_an_unknown_scheme_is_refused_with_the_registry_list(tmp_path, capsys):
    from dlmcost.cli import main

    text = (Path(__file__).resolve().parents[1] / "examples" / "tiny-dlm.yaml").read_text()
    model = tmp_path / "m.yaml"
    model.write_text(text.replace("scheme: block", "scheme: nosuch"))
    capsys.readouterr()
    assert main(["analyze", str(model), "--gpu", "h100"]) == 7
    err = capsys.readouterr().err
    assert "unknown scheme nosuch" in err and all(s in err for s in REGISTRY)
