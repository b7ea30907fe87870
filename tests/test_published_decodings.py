"""The model's published decoding sets every command's default tokens per forward (`--task` picks the
task, `--tpf` and `--steps` override it), and a quality floor keeps only the published decodings that
reach it (`--min-accuracy TASK=FRACTION`, plan and serve). Expected values are read from the bundled
tables here and computed by hand from them (a mix runs at the harmonic mean of its members' TPFs)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from types import SimpleNamespace

import pytest

from dlmcost import api
from dlmcost.cli import main
from dlmcost.inputs.decoding_profiles import ProfileDB
from dlmcost.serving.steptime import Decoding

MINI = "inclusionAI/LLaDA2.0-mini"


pytestmark = pytest.mark.usefixtures("bundled_offline")


def _mini_default():
    profiles = ProfileDB.load().for_model(MINI)
    return profiles.default_setting()


def _pooled(setting, task="general") -> tuple[float, float]:
    """(harmonic mean of the mix members' TPFs, CV of passes per token across them), by hand."""
    members = [setting.results[t].tpf for t in setting.source.mixes[task]
               if t in setting.results and setting.results[t].tpf]
    passes = [1 / t for t in members]
    mean = sum(passes) / len(passes)
    cv = math.sqrt(sum((p - mean) ** 2 for p in passes) / len(passes)) / mean
    return 1 / mean, cv


def run(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_default_tokens_per_forward_is_the_published_mix_pooled():
    """LLaDA2.0-mini's own decoding (threshold 0.95, block 32) on the 33-benchmark mix: the report
    prints their average TPF (2.6); requests drawn from the mix decode at their own benchmark's
    rate, so tokens pool at the harmonic mean."""
    setting = _mini_default()
    assert setting.results["general"].tpf == pytest.approx(2.6)
    tpf, _ = _pooled(setting)
    assert tpf < 2.6
    a = api.analyze(MINI, "h100")
    assert a["workload"]["steps"] == pytest.approx(256 / tpf)
    src = a["decoding_source"]
    assert (src["task"], src["tpf_task"], src["tpf"], src["tpf_published"]) == ("general", "general",
                                                                              pytest.approx(tpf), 2.6)
    assert src["accuracy"] == pytest.approx(setting.results["general"].accuracy)
    # a sweep's rows take the same
    s = api.sweep(MINI, gpus="h100", schemes=["block"])
    assert s["rows"][0]["steps"] == pytest.approx(256 / tpf)


def test_task_picks_the_task_and_tpf_or_steps_override(capsys):
    setting = _mini_default()
    a = api.analyze(MINI, "h100", task="humaneval-plus")
    assert a["workload"]["steps"] == pytest.approx(256 / setting.results["humaneval-plus"].tpf)
    assert a["decoding_source"]["task"] == "humaneval-plus"
    given = api.analyze(MINI, "h100", tpf=3.0)
    assert given["workload"]["steps"] == pytest.approx(256 / 3.0) and given["decoding_source"] is None
    rc, out, _ = run(capsys, "analyze", MINI, "--gpu", "h100", "--task", "gsm-plus")
    assert rc == 0 and "on gsm-plus" in " ".join(out.split())
    # a task without a published TPF for the setting: one line naming those that have one
    rc, _, err = run(capsys, "analyze", MINI, "--gpu", "h100", "--task", "gsm8k")
    assert rc == 2 and err.startswith("error: --task:") and "gsm-plus" in err and err.count("\n") == 1
    assert re.fullmatch(r"error: --task: LLaDA2.0-mini threshold 0.95, block 32 has no published tokens per forward "
                        r"for 'gsm8k'; published for: [a-z0-9-]+(, [a-z0-9-]+)+ \(or give --tpf\)\n", err), err
    # a model without published decodings
    rc, _, err = run(capsys, "analyze", "google/gemma-2-9b", "--gpu", "h100", "--task", "gsm8k")
    assert rc == 2 and err == ("error: --task: no published decodings for google/gemma-2-9b (`dlmcost decodings` "
                               "lists the models that have them); give --tpf or --steps\n")


def test_serve_draws_the_mix_spread_unless_given():
    setting = _mini_default()
    tpf, cv = _pooled(setting)
    r = api.serve(MINI, api.ClosedLoop(4), api.ServeSetup(gpu="h100"), prompt=256, answer=256).record()
    d = r["deployment"]
    assert (d["tpf"], d["tpf_spread"]) == (pytest.approx(tpf), pytest.approx(cv))
    assert d["published"]["label"] == setting.label
    r = api.serve(MINI, api.ClosedLoop(4), api.ServeSetup(gpu="h100", tpf_spread=0.0), prompt=256, answer=256).record()
    assert r["deployment"]["tpf_spread"] == 0.0


def test_a_quality_floor_keeps_the_decodings_that_reach_it(capsys):
    """gsm-plus >= 0.86: LLaDA2.0-mini's published 86.5% there reaches it (at its gsm-plus TPF);
    0.87 does not, and serve then says so with exit 8."""
    setting = _mini_default()
    plus = setting.results["gsm-plus"]
    assert plus.accuracy == pytest.approx(0.865)
    r = api.serve(MINI, api.ClosedLoop(2), api.ServeSetup(gpu="h100", min_accuracy=("gsm-plus", 0.86)),
                  prompt=256, answer=256).record()
    assert r["deployment"]["tpf"] == pytest.approx(plus.tpf)
    rc, _, err = run(capsys, "serve", MINI, "--gpu", "h100", "-c", "2", "--min-accuracy", "gsm-plus=0.87")
    assert rc == 8 and "0 of" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "serve", MINI, "--gpu", "h100", "-c", "2", "--min-accuracy", "gsm-plus")
    assert rc == 2 and err.startswith("error: --min-accuracy")
    rc, _, err = run(capsys, "serve", MINI, "--gpu", "h100", "-c", "2", "--min-accuracy", "gsm-plus=0.8",
                     "--tpf", "3")
    assert rc == 2 and "published decodings" in err


def test_plan_at_equal_quality_searches_what_reaches_the_floor(capsys):
    """Side by side with Qwen3-30B-A3B at gsm-plus >= 0.86: LLaDA2.0-mini at its gsm-plus TPF, and
    the AR model (89.4% there at one token per forward) decoded autoregressively; at 0.87 only the
    AR model is left, and the plan says why."""
    common = ["plan", f"{MINI},Qwen/Qwen3-30B-A3B", "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision",
              "bf16", "--requests", "200", "-f", "json"]
    rc, out, err = run(capsys, *common, "--min-accuracy", "gsm-plus=0.86")
    assert rc == 0, err
    doc = json.loads(out)
    tpf = _mini_default().results["gsm-plus"].tpf
    assert {d["decoding"] for d in doc["deployments"]} >= {f"block/32/{tpf:.3g}", "ar"}
    rc, out, err = run(capsys, *common, "--min-accuracy", "gsm-plus=0.87")
    assert rc == 0, err
    doc = json.loads(out)
    assert {d["model"] for d in doc["deployments"]} == {"Qwen/Qwen3-30B-A3B"}
    assert any("LLaDA2.0-mini: 0 of" in note for note in doc["search"]["quality"])
    rc, _, err = run(capsys, *common, "--min-accuracy", "gsm-plus=0.99")
    assert rc == 8 and "no model has a published decoding" in err


def test_settings_that_decode_alike_are_searched_once(capsys):
    """LLaDA-8B-Instruct at gsm8k >= 0.7: several published settings share a label (scheme, block,
    tokens per forward) and so cost alike; each label is searched once, by the most accurate of
    them (the product of the lists is exactly what was evaluated), and the header names each."""
    from dlmcost.analysis.published import meeting_floor
    from dlmcost.inputs.models import resolve_model
    from dlmcost.render.plan import plan_header
    from dlmcost.serving.decodings import from_published

    spec = resolve_model("GSAI-ML/LLaDA-8B-Instruct")
    found, _ = meeting_floor(spec, "gsm8k", 0.7, None)
    by_label: dict[str, list] = {}
    for p in found:
        by_label.setdefault(from_published(spec, p).label, []).append(p)
    assert len(by_label) < len(found)  # the case this is about: some labels published twice
    rc, out, err = run(capsys, "plan", "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                       "--requests", "100", "--min-accuracy", "gsm8k=0.7", "-f", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert sorted(doc["search"]["decodings"]) == sorted(by_label)
    assert doc["evaluated"] + doc["skipped"]["unsupported_or_not_fitting"] == len(by_label)
    for label, settings in by_label.items():
        kept = doc["search"]["published"][f"GSAI-ML/LLaDA-8B-Instruct {label}"]
        assert kept["accuracy"] == max(p.accuracy for p in settings)
    header = " ".join(plan_header(doc).split())
    assert f"searched {len(by_label)} candidates" in header
    assert all(f"{label} = " in header for label in by_label)
    assert "quality floor gsm8k" in header


# --- a bundled twin: LLaDA2.1 shares LLaDA2.0's config and decodes with its own published modes --------

MINI21 = "inclusionAI/LLaDA2.1-mini"


def _mini21(key):
    return ProfileDB.load().for_model(MINI21).setting(key)


def test_a_bundled_twin_decodes_with_its_own_published_setting():
    """LLaDA2.1-mini's default is its S mode on the 33-benchmark mix, as the LLaDA2.1 report's Table 2
    prints it ("Average ... 62.07 | 5.34"), pooled at the harmonic mean of its members; the flash's
    Table 1 row is 72.34 | 5.93. LLaDA2.0-mini, the same file's architecture, keeps its own."""
    s = _mini21("s-mode")
    tpf, cv = _pooled(s)
    a = api.analyze(MINI21, "h100")
    src = a["decoding_source"]
    assert (src["label"], src["tpf_published"], src["accuracy"]) == ("LLaDA2.1-mini S mode", 5.34, 0.6207)
    assert src["source"] == "arXiv 2602.08676, Table 2" and src["tpf"] == pytest.approx(tpf)
    assert a["workload"]["steps"] == pytest.approx(256 / tpf)
    flash = api.analyze("inclusionAI/LLaDA2.1-flash", "h200", tp=8)["decoding_source"]
    assert (flash["label"], flash["tpf_published"], flash["accuracy"]) == ("LLaDA2.1-flash S mode", 5.93, 0.7234)
    assert api.analyze(MINI, "h100")["decoding_source"]["label"] == "LLaDA2.0-mini threshold 0.95, block 32"
    # --task: Table 2's HumanEval+ row, S mode 80.49 at 12.32 tokens per forward
    plus = api.analyze(MINI21, "h100", task="humaneval-plus")["decoding_source"]
    assert (plus["tpf"], plus["accuracy"]) == (12.32, 0.8049)
    r = api.serve(MINI21, api.ClosedLoop(2), api.ServeSetup(gpu="h100"), prompt=256, answer=256).record()
    assert (r["deployment"]["tpf"], r["deployment"]["tpf_spread"]) == (pytest.approx(tpf), pytest.approx(cv))


def test_a_floor_only_q_mode_reaches_picks_q_mode(capsys):
    """general >= 0.63: Table 2 prints S mode at 62.07% and Q mode at 63.90%, so only Q mode is
    searched (at its pooled 3.12-average mix); at 0.62 both are. Side by side with Qwen3-30B-A3B
    the plan's header names the published decoding and its source."""
    q = _mini21("q-mode")
    assert (q.results["general"].accuracy, q.results["general"].tpf) == (0.639, 3.12)
    q_tpf, _ = _pooled(q)
    s_tpf, _ = _pooled(_mini21("s-mode"))
    r = api.serve(MINI21, api.ClosedLoop(2), api.ServeSetup(gpu="h100", min_accuracy=("general", 0.63)),
                  prompt=256, answer=256).record()
    assert r["deployment"]["published"]["label"] == "LLaDA2.1-mini Q mode"
    assert r["deployment"]["tpf"] == pytest.approx(q_tpf)
    common = ["plan", MINI21, "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
              "--requests", "200", "-f", "json"]
    rc, out, err = run(capsys, *common, "--min-accuracy", "general=0.63")
    assert rc == 0, err
    assert json.loads(out)["search"]["decodings"] == [f"block/32/{q_tpf:.3g}"]
    rc, out, err = run(capsys, *common, "--min-accuracy", "general=0.62")
    assert rc == 0, err
    assert sorted(json.loads(out)["search"]["decodings"]) == sorted([f"block/32/{q_tpf:.3g}",
                                                                     f"block/32/{s_tpf:.3g}"])
    rc, out, err = run(capsys, "plan", f"{MINI21},Qwen/Qwen3-30B-A3B", "--rate", "20", "--p95", "10", "--gpu", "h100",
                       "--tp", "1", "--precision", "bf16", "--requests", "200")
    assert rc == 0, err
    assert f"block/32/{s_tpf:.3g} = LLaDA2.1-mini S mode (general 62.1%; arXiv 2602.08676, Table 2)" \
        in " ".join(out.split())


def test_a_task_is_read_in_any_case_as_the_files_spell_it(capsys):
    """The decoding files name tasks in lower case; --min-accuracy read 'GSM8K=' as gsm8k while
    --task refused 'GSM8K'. Both read a task the same way now, and so does a scenario."""
    from dlmcost.plan.scenario import SearchSpec, quality_floor, read_scenario

    rc, out, err = run(capsys, "analyze", MINI, "--gpu", "h100", "--task", " GSM-Plus ")
    assert rc == 0 and "on gsm-plus" in " ".join(out.split()), err
    rc, out, _ = run(capsys, "decodings", MINI, "--task", "GSM-PLUS", "-f", "csv")
    assert rc == 0 and {r["task"] for r in csv.DictReader(io.StringIO(out))} == {"gsm-plus"}
    assert SearchSpec(task="GSM-Plus").task == "gsm-plus"
    assert quality_floor(read_scenario(None, {"search": {"min_accuracy": {" GSM8K ": 0.5}}})) == ("gsm8k", 0.5)
    assert api.parse_floor("GSM8K=0.5") == ("gsm8k", 0.5)


# --- the quality floor's settings, and how each one's tokens per forward is found -----------------


def _mini_setting(key):
    return ProfileDB.load().for_model(MINI).setting(key)


def test_a_floor_on_a_task_without_a_tpf_takes_the_same_decodings_from_another_source():
    """The LLaDA2.0 report prints LLaDA2.0-mini's accuracy at threshold 0.95, block 32 (HumanEval+
    79.88%, GSM8K 94.24%) but no tokens per forward; the LLaDA2.1 report ran the same decoding and
    prints HumanEval+ at 5.16 tokens per forward (Table 2) but no GSM8K. A floor on HumanEval+ keeps
    the report's setting at Table 2's 5.16; one on GSM8K at the same decoding's 33-benchmark mix
    (no source prints a GSM8K TPF), said in `tpf_task`. A floor equal to the accuracy reaches it."""
    from dlmcost.analysis.published import _same_decoding, meeting_floor
    from dlmcost.inputs.models import resolve_model

    spec, report = resolve_model(MINI), _mini_setting("t0.95-b32-report2.0")
    settings = ProfileDB.load().for_model(MINI).settings
    assert [s.key for s in _same_decoding(report, settings)] == ["t0.95-b32-report2.0", "t0.95-b32"]
    found, note = meeting_floor(spec, "humaneval-plus", 0.7988)
    assert note == f"{MINI}: 2 of 2 published settings reach humaneval-plus >= 0.7988"
    p = next(p for p in found if p.setting == "t0.95-b32-report2.0")
    assert (p.accuracy, p.tpf, p.tpf_task, p.spread, p.block) == (0.7988, 5.16, "humaneval-plus", 0.0, 32)
    assert p.source == "arXiv 2602.08676, Table 2"
    (p,), note = meeting_floor(spec, "gsm8k", 0.9)
    mix_tpf, mix_cv = _pooled(_mini_default())
    assert (p.setting, p.accuracy, p.tpf_task, p.tpf_published) == ("t0.95-b32-report2.0", 0.9424, "general", 2.6)
    assert (p.tpf, p.spread) == (pytest.approx(mix_tpf), pytest.approx(mix_cv))
    assert note == f"{MINI}: 1 of 1 published settings reach gsm8k >= 0.9"
    # the default decoding never borrows: a task without a TPF of its own is refused (above)
    from dlmcost.analysis.published import published
    assert published(report, "gsm8k", others=settings) is None


def test_a_floor_nothing_reaches_names_the_best_and_a_model_without_decodings_has_none():
    from dlmcost.analysis.published import accuracy_tasks, meeting_floor
    from dlmcost.inputs.models import resolve_model

    assert meeting_floor(resolve_model(MINI), "gsm-plus", 0.87) == (
        [], f"{MINI}: 0 of 1 published settings reach gsm-plus >= 0.87 (the best published: 0.865)")
    gemma = resolve_model("google/gemma-2-9b")
    assert meeting_floor(gemma, "gsm8k", 0.5) == ([], "google/gemma-2-9b: no published decodings")
    assert accuracy_tasks(gemma) is None
    # LLaDA2.0-mini's own tasks: GSM8K from the LLaDA2.0 report, not LLaDA2.1-mini's (same file)
    tasks = accuracy_tasks(resolve_model(MINI))
    assert tasks == sorted(tasks) and {"gsm8k", "gsm-plus", "general"} <= set(tasks)
    own = {t for s in ProfileDB.load().for_model(MINI).settings if s.checkpoint == MINI for t in s.results}
    assert set(tasks) <= own


def test_one_benchmarks_tpf_has_no_spread_and_a_two_member_mix_pools():
    """A single task's published TPF carries no spread across prompts (0); a mix of two members
    with TPFs 2 and 4 (a third printed without one) pools at 1 / mean(1/2, 1/4) = 8/3 with a CV of
    passes 0.125 / 0.375 = 1/3."""
    from dlmcost.analysis.published import _tpf_and_spread

    assert api.analyze(MINI, "h100", task="gsm-plus")["decoding_source"]["spread"] == 0.0
    results = {"a": SimpleNamespace(tpf=2.0), "b": SimpleNamespace(tpf=4.0), "c": SimpleNamespace(tpf=None)}
    setting = SimpleNamespace(source=SimpleNamespace(mixes={"mix": ["a", "b", "c"]}), results=results,
                              result=results.get)
    tpf, cv = _tpf_and_spread(setting, "mix")
    assert (tpf, cv) == (pytest.approx(8 / 3), pytest.approx(1 / 3))


@pytest.mark.parametrize("text, floor", [("gsm8k=85%", ("gsm8k", 0.85)), ("gsm8k= 85 %", ("gsm8k", 0.85)),
                                         ("gsm8k=1", ("gsm8k", 1.0)), ("gsm8k=100%", ("gsm8k", 1.0))])
def test_a_floor_reads_as_a_fraction_or_a_percentage(text, floor):
    assert api.parse_floor(text) == floor


@pytest.mark.parametrize("text", ["=0.5", " =0.5", "gsm8k=0.5=0.6", "gsm8k=0.5X", "gsm8k=%85"])
def test_a_floor_that_is_not_task_equals_fraction_is_refused_naming_it(text):
    from dlmcost.errors import UsageError

    with pytest.raises(UsageError, match=r"^--min-accuracy: expected TASK=FRACTION .*, got '" + text.replace(
            "%", ".").replace("=", ".") + "'$"):
        api.parse_floor(text)


def test_the_source_names_the_reference_and_its_table():
    """A decoding's source is its reference's first part (before ';') and its location's first
    (before ',' or '('): Dream's blog figure; the LLaDA2.0 report's "Table 2, column '...'". A mix
    the source prints no row for (LLaDA2.1's 10 MBE benchmarks, each printed alone) names the
    reference alone, prints its pooled TPF as its own and has no accuracy."""
    from dlmcost.analysis.published import meeting_floor
    from dlmcost.inputs.models import resolve_model

    dream = api.analyze("Dream-org/Dream-v0-Instruct-7B", "h100")["decoding_source"]
    assert dream["source"] == ("HKUNLP/hkunlp.github.io assets/img/2025-04-02-dream-img/sft.png, "
                               "blog figure 'supervised fine-tuning results'")
    (qwen,), _ = meeting_floor(resolve_model("Qwen/Qwen3-30B-A3B"), "gsm8k", 0.96)
    assert (qwen.source, qwen.accuracy) == ("arXiv 2512.15745, Table 2", 0.9636)
    mix = "average-10-mbe-benchmarks"
    assert _mini_default().result(mix) is None
    tpf, cv = _pooled(_mini_default(), mix)
    src = api.analyze(MINI, "h100", task=mix)["decoding_source"]
    assert (src["source"], src["accuracy"], src["tpf_task"]) == ("arXiv 2602.08676", None, mix)
    assert (src["tpf"], src["tpf_published"], src["spread"]) == (pytest.approx(tpf), pytest.approx(tpf),
                                                                 pytest.approx(cv))


# --- which decodings are searched (serving/decodings.py) -------------------------------------------


def test_floor_decodings_keep_the_published_block_and_take_the_tpf_on_the_task_asked():
    """LLaDA-8B-Instruct's evaluation setting decodes in blocks of 8 (its sampler says 32): its
    decoding keeps 8. LLaDA2.0-mini at gsm-plus >= 0.86 runs at gsm-plus's 2.41 tokens
    per forward, or HumanEval+'s 5.16 with --task humaneval-plus (Table 2 of arXiv 2602.08676).
    Qwen3-30B-A3B's autoregressive setting decodes one token per forward and carries its source."""
    from dlmcost.analysis.published import meeting_floor
    from dlmcost.inputs.models import resolve_model
    from dlmcost.serving.decodings import floor_decodings, from_published

    llada = resolve_model("GSAI-ML/LLaDA-8B-Instruct")
    assert llada.sampler.block == 32
    (b8,) = [p for p in meeting_floor(llada, "gsm8k", 0.7)[0] if p.setting == "eval-g256-b8"]
    assert (from_published(llada, b8).scheme, from_published(llada, b8).block) == ("mdm", 8)
    mini = resolve_model(MINI)
    assert [d.tpf for d in floor_decodings(mini, ("gsm-plus", 0.86))[0]] == [2.41]
    assert [d.tpf for d in floor_decodings(mini, ("gsm-plus", 0.86), "humaneval-plus")[0]] == [5.16]
    (ar,), _ = floor_decodings(resolve_model("Qwen/Qwen3-30B-A3B"), ("gsm8k", 0.96))
    assert (ar.scheme, ar.block, ar.tpf, ar.published.setting) == ("ar", None, 1.0, "ar-report2.0")


def test_a_models_own_decoding_without_a_published_one_is_its_samplers():
    """Dream-v0-Base has no published decoding and its sampler no block: masked diffusion over the
    whole answer (no block), at gen / steps tokens per forward (512 / 512 = 1; a sampler of 256
    tokens in 64 steps: 4). An autoregressive model decodes one token per forward; asked for a
    diffusion scheme it was not published with, it takes that scheme's own block."""
    from dlmcost.engine.schemes import get_scheme
    from dlmcost.inputs.models import resolve_model
    from dlmcost.serving.decodings import choose_decodings

    dream = resolve_model("Dream-org/Dream-v0-Base-7B")
    assert choose_decodings(dream, None)[0] == Decoding("mdm", None, 1.0)
    fast = dream.model_copy(update=dict(sampler=dream.sampler.model_copy(update=dict(gen=256, steps=64))))
    assert choose_decodings(fast, None)[0] == Decoding("mdm", None, 4.0)
    gemma = resolve_model("google/gemma-2-9b")
    assert choose_decodings(gemma, None) == [Decoding("ar", None, 1.0)]
    given = SimpleNamespace(scheme="multi-block", block=None, tpf=2.0, steps=None)
    from dlmcost.errors import DlmcostWarning

    with pytest.warns(DlmcostWarning, match="was not published with multi-block"):
        (d,) = choose_decodings(gemma, [given])
    assert (d.block, d.tpf) == (get_scheme("multi-block").default_block, 2.0) == (32, 2.0)


def test_a_floor_on_a_task_none_of_the_models_has_names_them_all():
    from dlmcost.errors import UsageError
    from dlmcost.inputs.models import resolve_model
    from dlmcost.serving.decodings import check_floor_task

    models = [resolve_model(MINI), resolve_model("GSAI-ML/LLaDA-8B-Instruct")]
    with pytest.raises(UsageError, match=f"^--min-accuracy: no published accuracy on 'gms8k' for {MINI}, "
                                         "GSAI-ML/LLaDA-8B-Instruct; published for: "):
        check_floor_task(models, "gms8k")
    check_floor_task(models, "gsm8k")  # published for one of them: no error
