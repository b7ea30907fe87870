"""The registry's contract and each scheme's validity rules, at their boundaries.

Written against docs/methodology.md ("Schemes": blocks must divide Lg, S >= nb, tpf <= k_d + 1;
the block matters to `mdm` only under --logits committed) and the `@scheme` decorator's
docstring, not against the code's expressions. Each limit is tried on both sides, and each
refusal's message is pinned word for word, because it is what a user reads.
"""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost import api
from dlmcost.errors import WorkloadError
from dlmcost.engine.schemes import REGISTRY
from dlmcost.engine.schemes.base import family, scheme
from dlmcost.engine.workload import make_knobs

LLADA = "GSAI-ML/LLaDA-8B-Instruct"


def knobs(**given):
    cols = dict(prompt=8.0, gen=16.0, steps=4.0, block=4.0, store_pass=False, logits_committed=False,
                active_blocks=1.0, cache_delay=0.0, refresh_every=0.0, window=0.0, drafter=False)
    return make_knobs(**{**cols, **given})


# --- registering a scheme ------------------------------------------------------------------------


def test_registering_a_scheme_records_everything_the_program_reads():
    def passes(k):
        return [family("step", k, r=k.steps, q=k.canvas)]

    def cached(k):
        return k.canvas

    def rules(k):
        return [(k.steps > 0, "needs steps")]

    try:
        returned = scheme("test-only", summary="a scheme for this test", knobs=("steps",), cached_tokens=cached,
                          stops="never", default_block=8)(passes)
        assert returned is passes  # the decorator hands the function back unchanged
        s = REGISTRY["test-only"]
        assert (s.name, s.passes, s.summary, s.knobs, s.cached_tokens) == (
            "test-only", passes, "a scheme for this test", ("steps",), cached)
        assert (s.stops, s.default_block) == ("never", 8)  # keyword flags reach the Scheme
        assert s.checks(knobs()) == []  # no rules given: nothing to refuse

        scheme("test-only-ruled", summary="with rules", knobs=(), cached_tokens=cached, checks=rules)(passes)
        assert REGISTRY["test-only-ruled"].checks is rules
        assert REGISTRY["test-only-ruled"].stops == "block"  # the documented default
    finally:
        REGISTRY.pop("test-only", None)
        REGISTRY.pop("test-only-ruled", None)


def test_a_scheme_reading_an_unknown_knob_is_refused_at_registration():
    with pytest.raises(AssertionError, match="unknown knobs"):
        scheme("test-only-bad", summary="", knobs=("steps", "temperature"), cached_tokens=lambda k: k.canvas)
    assert "test-only-bad" not in REGISTRY


def test_which_knobs_a_scheme_uses():
    """sweep evaluates a scheme once per value of a knob it ignores; mdm reads the block only to
    limit the logits (docs: "the block matters only for --logits committed")."""
    mdm, ar, block = REGISTRY["mdm"], REGISTRY["ar"], REGISTRY["block"]
    assert mdm.uses("steps") and mdm.uses("steps", logits_committed=True)
    assert not mdm.uses("block")
    assert mdm.uses("block", logits_committed=True)
    assert not mdm.uses("window", logits_committed=True)
    assert not ar.uses("steps") and not ar.uses("block", logits_committed=True)
    assert block.uses("store_pass") and not block.uses("window")


def test_which_given_knobs_a_scheme_ignores():
    """The knobs among those given whose cost a scheme does not read (sweep's warning and its one
    evaluation per ignored value), from the registrations: mdm reads the steps, and the block only
    under --logits committed (not by default); ar reads no knob. `tpf` sets the steps, so mdm reads
    it and ar ignores it; a name outside the scheme knobs and `tpf` (the prompt) is never listed."""
    mdm, ar = REGISTRY["mdm"], REGISTRY["ar"]
    assert mdm.ignored(["steps", "tpf", "block", "window", "prompt"]) == ["block", "window"]
    assert mdm.ignored(["steps", "tpf", "block", "window"], logits_committed=True) == ["window"]
    assert mdm.ignored(["tpf"], False) == [] and mdm.ignored(["tpf"], True) == []
    assert ar.ignored(["tpf", "steps", "block"], True) == ["tpf", "steps", "block"]


def test_which_schemes_stop_at_the_end_of_sequence():
    """docs/methodology.md: `ar`, `draft-verify`, `block`, `multi-block` and `diffgemma` stop after
    the token or block that holds the end-of-sequence token; `mdm`, `prefix-cache`, `dual-cache` and
    `windowed-refresh` run the whole canvas (the catalog's "stops at EOS" column, memory's flag)."""
    stopping = {"ar", "draft-verify", "block", "multi-block", "diffgemma"}
    whole = {"mdm", "prefix-cache", "dual-cache", "windowed-refresh"}
    assert stopping | whole == set(REGISTRY)
    assert {name for name, s in REGISTRY.items() if s.stops_at_eos} == stopping


# --- block tiling: blocks divide Lg, at least one step per block --------------------------------


@pytest.mark.parametrize("given,message", [
    (dict(gen=64, block=128, steps=64), "block length 128 is longer than the generation (64 tokens)"),
    (dict(gen=64, block=24, steps=64), "block length 24 does not divide the generation length 64"),
    (dict(gen=64, block=16, steps=3), "3 steps is fewer than the 4 blocks (at least one step per block)"),
])
def test_block_tiling_refusals_say_what_is_wrong(given, message):
    with pytest.raises(WorkloadError) as err:
        api.analyze(LLADA, "h100", scheme="block", **given)
    assert str(err.value) == message


def test_one_step_per_block_is_the_least_allowed():
    r = api.analyze(LLADA, "h100", scheme="block", prompt=8, gen=64, block=16, steps=4)["results"][0]
    assert r["nfe"] == 1 + 4  # prefill + one step per block
    with pytest.raises(WorkloadError):
        api.analyze(LLADA, "h100", scheme="block", prompt=8, gen=64, block=16, steps=3)


# --- multi-block and windowed-refresh: their smallest settings are valid ------------------------


def test_one_block_in_flight_and_no_window_are_valid_settings():
    one = api.analyze(LLADA, "h100", scheme="multi-block", prompt=8, gen=64, block=16, steps=16, active_blocks=1,
                      cache_delay=0, refresh_every=0)["results"][0]
    assert one["nfe"] == 1 + 16  # prefill + S
    bare = api.analyze(LLADA, "h100", scheme="windowed-refresh", prompt=8, gen=64, block=16, steps=16,
                       window=0, refresh_every=0)["results"][0]
    step = [p for p in bare["passes"] if p["name"] == "step"][0]
    assert step["q"] == 16  # the block alone: q = min(b + 2*0, Lp + Lg)


def test_the_scheme_rules_accept_their_limits_and_refuse_beyond():
    mb, wr = REGISTRY["multi-block"], REGISTRY["windowed-refresh"]
    ok = lambda s, **k: all(np.all(passed) for passed, _ in s.checks(knobs(**k)))  # noqa: E731
    assert ok(mb, active_blocks=1.0) and not ok(mb, active_blocks=0.5)
    assert ok(mb, cache_delay=0.0) and not ok(mb, cache_delay=-1.0)
    assert ok(mb, refresh_every=0.0) and not ok(mb, refresh_every=-1.0)
    assert ok(wr, window=0.0) and not ok(wr, window=-1.0)
    assert ok(wr, refresh_every=0.0) and not ok(wr, refresh_every=-1.0)


# --- draft-verify: at most k_d + 1 tokens accepted per iteration --------------------------------


def test_draft_verify_accepts_all_drafts_plus_the_bonus_token_and_no_more():
    r = api.analyze(LLADA, "h100", scheme="draft-verify", prompt=8, gen=64, block=4, tpf=5)["results"][0]
    # the prefill gives the first token; the verify passes add the other 63 at 5 each
    assert r["nfe"] == pytest.approx(1 + 63 / 5, rel=1e-12)
    with pytest.raises(WorkloadError) as err:
        api.analyze(LLADA, "h100", scheme="draft-verify", prompt=8, gen=64, block=4, tpf=6)
    assert str(err.value) == "6 accepted tokens per iteration is more than the 4 drafts plus one can give"
