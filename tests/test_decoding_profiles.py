"""Published decodings (decoding/*.yaml, dlmcost/inputs/decoding_profiles.py): every bundled file
loads, every diffusion model has a default or a named gap, spot values match the sources' printed
numbers (typed here by hand from the tables they quote), the spread proxy against a hand
computation, hostile files as one-line errors, and `dlmcost decodings`."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

import pytest
import yaml

from dlmcost.cli import main
from dlmcost.engine.schemes import SCHEMES, get_scheme
from dlmcost.inputs.bundled import bundled_decoding_dir
from dlmcost.inputs.decoding_profiles import (DecodingProfileError, ProfileDB, bundled_profiles, mix_tpfs,
                                              read_profile_file, tpf_spread)


@pytest.fixture(scope="module")
def db() -> ProfileDB:
    return ProfileDB.load()


def bundled_models() -> list[dict]:
    from dlmcost.analysis.model_info import list_models

    return list_models()


# Bundled diffusion models without a complete default, and why (the research found nothing more).
NO_FILE = {
    "GSAI-ML/LLaDA-8B-Base": "a pretrained checkpoint: the sources evaluate LLaDA-8B-Instruct's decodings",
    "Dream-org/Dream-v0-Base-7B": "a pretrained checkpoint: the sources evaluate Dream-v0-Instruct-7B's decodings",
    "inclusionAI/LLaDA-MoE-7B-A1B-Instruct": "no published TPF or accuracy found (dInfer gives tokens/s only; "
                                             "its paper's per-benchmark TPF table was not readable)",
}
NO_ACCURACY = {  # a default TPF, but no accuracy with it
    "google/diffusiongemma-26B-A4B-it": "vLLM's throughput benchmark (random prompts) is the only published TPF",
}
UNVERIFIED_DEFAULT = {  # the default's accuracy comes from a secondary copy
    "apple/DiffuCoder-7B-Instruct": "only its cpGRPO fine-tune's numbers, from the Dream-Coder blog",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "only the base model's numbers, from copies of the paper's table",
}


# --- the bundled files ------------------------------------------------------------------------------


def test_every_bundled_file_loads_and_is_named_for_its_bundled_architecture():
    profiles = bundled_profiles()
    ids = {m["id"] for m in bundled_models()}
    assert len(profiles) == len(list(bundled_decoding_dir().glob("*.yaml"))) == 12
    for path, p in zip(sorted(bundled_decoding_dir().glob("*.yaml")), profiles):
        assert path.name == p.architecture.replace("/", "__") + ".yaml"
        assert p.architecture in ids  # its config is bundled
        assert read_profile_file(path) == p


def test_the_bundled_files_hold_every_published_result():
    # 533 rows in the research extraction, none without both an accuracy and a TPF
    counts = {p.architecture: sum(len(s.results) for s in p.settings) for p in bundled_profiles()}
    assert sum(counts.values()) == 533
    assert counts["inclusionAI/LLaDA2.0-mini"] == 46 + 79  # LLaDA2.0-mini's own rows + LLaDA2.1-mini's
    assert counts["inclusionAI/LLaDA2.0-flash"] == 44 + 79 + 1  # + LLaDA2.0-flash-CAP
    assert counts["GSAI-ML/LLaDA-8B-Instruct"] == 48 + 10 + 14 + 12  # + D2F, dParallel, d3LLM


def test_every_scheme_is_one_dlmcost_runs():
    for p in bundled_profiles():
        for s in p.settings:
            assert s.scheme in SCHEMES, (p.architecture, s.key)


def test_every_diffusion_model_has_a_default_with_a_tpf_or_a_named_gap(db):
    for m in bundled_models():
        if get_scheme(m["default_scheme"]).autoregressive:
            continue
        p = db.for_model(m["id"])
        if m["id"] in NO_FILE:
            assert p is None, f"{m['id']} has a file now: take it off NO_FILE"
            continue
        assert p is not None, f"{m['id']}: no decoding file and no reason in NO_FILE"
        result = p.default_setting().result(p.default_task)
        assert result.tpf is not None
        assert (result.accuracy is None) == (m["id"] in NO_ACCURACY), m["id"]
        assert result.verified == (m["id"] not in UNVERIFIED_DEFAULT), m["id"]


def test_the_ar_baselines_have_files_at_one_token_per_forward(db):
    for model in ("Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen2.5-7B", "meta-llama/Meta-Llama-3-8B",
                  "mistralai/Mixtral-8x7B-Instruct-v0.1"):
        p = db.for_model(model)
        d = p.default_setting()
        assert get_scheme(d.scheme).autoregressive and d.result(p.default_task).tpf == 1.0


@pytest.mark.parametrize("model, checkpoint, key, task", [
    ("inclusionAI/LLaDA2.0-mini", "inclusionAI/LLaDA2.0-mini", "t0.95-b32", "general"),
    ("inclusionAI/LLaDA2.0-flash", "inclusionAI/LLaDA2.0-flash", "t0.95-b32", "general"),
    ("GSAI-ML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-8B-Instruct", "eval-g256-b8", "gsm8k"),
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-Instruct-2507", "ar", "general"),
])
def test_defaults_are_the_models_own_published_decoding(db, model, checkpoint, key, task):
    p = db.for_model(model)
    d = p.default_setting()
    assert (d.checkpoint, d.key, p.default_task) == (checkpoint, key, task)


def test_the_llada2_default_is_threshold_095_block_32(db):
    # LLaDA2.0 report Sec. 6.1: "a block size of 32, and a decoding threshold of 0.95"
    for model in ("inclusionAI/LLaDA2.0-mini", "inclusionAI/LLaDA2.0-flash"):
        d = db.for_model(model).default_setting()
        assert (d.scheme, d.block, d.threshold) == ("block", 32, 0.95)


# Printed numbers, typed from the sources' tables: (model, setting key, task, accuracy, TPF)
PRINTED = [
    # LLaDA2.1 report, Table 1: "Average 73.09 71.52 72.43 | 3.08 72.34 | 5.93 73.54 | 3.64"
    ("inclusionAI/LLaDA2.1-flash", "s-mode", "general", 0.7234, 5.93),
    ("inclusionAI/LLaDA2.1-flash", "q-mode", "general", 0.7354, 3.64),
    ("inclusionAI/LLaDA2.0-flash", "t0.95-b32", "general", 0.7243, 3.08),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "ar", "general", 0.7309, 1.0),
    # "HumanEval+ 87.88 87.58 88.41 | 6.45 89.63 | 13.81 89.63 | 9.18"
    ("inclusionAI/LLaDA2.1-flash", "s-mode", "humaneval-plus", 0.8963, 13.81),
    ("inclusionAI/LLaDA2.1-flash", "q-mode", "humaneval-plus", 0.8963, 9.18),
    # Table 4, AIME 2025 with multi-block editing: 70.00 at 4.71
    ("inclusionAI/LLaDA2.1-flash", "s-mode-mbe", "aime2025", 0.70, 4.71),
    # Table 2: "Average 61.59 64.72 63.39 | 2.60 62.07 | 5.34 63.90 | 3.12"
    ("inclusionAI/LLaDA2.1-mini", "s-mode", "general", 0.6207, 5.34),
    ("Qwen/Qwen3-8B", "ar", "general", 0.6159, 1.0),
    # LLaDA2.0 report Sec. 6.3: "highest quality score (70.15) ... (2.55 TPF)"; 0.85: 3.31 TPF, 67.90
    ("inclusionAI/LLaDA2.0-mini", "t0.95-b32-report2.0", "subset-average", 0.7015, 2.55),
    ("inclusionAI/LLaDA2.0-mini", "t0.85-b32-report2.0", "subset-average", 0.6790, 3.31),
    # d3LLM data_llada.yaml: "d3LLM-LLaDA: [[1.0, 74.02], [9.11, 73.09]]"; dParallel-LLaDA [5.14, 72.63]
    ("d3LLM/d3LLM_LLaDA", "aup-d3llm", "gsm8k", 0.7309, 9.11),
    ("Zigeng/dParallel-LLaDA-8B-instruct", "aup-dparallel", "gsm8k", 0.7263, 5.14),
    # dParallel README table: "#Steps 30 | Accuracy 76.1%" over a 256-token canvas: TPF 256 / 30
    ("Zigeng/dParallel-LLaDA-8B-instruct", "dp-dparallel-t0.5", "gsm8k", 0.761, 256 / 30),
    # Fast-dLLM README: GSM8K 5-shot, parallel (no cache) 79.2 at 16.53 tok/s vs the baseline's 6.73
    ("GSAI-ML/LLaDA-8B-Instruct", "fd-g256-parallel", "gsm8k", 0.792, 2.5),
    # LLaDA EVAL.md: "GSM8k | gen_length 256 | block_length 8 | Internal toolkit 78.6"
    ("GSAI-ML/LLaDA-8B-Instruct", "eval-g256-b8", "gsm8k", 0.786, 1.0),
    # vLLM blog: "Committed per denoising step: 16.02" (no accuracy)
    ("google/diffusiongemma-26B-A4B-it", "vllm-16-steps", "random-synthetic", None, 16.02),
    # SDAR README Table 1: "SDAR-4B-Chat | 74.9 | 89.9 | ..." (MMLU, GSM8K, ...)
    ("JetLM/SDAR-4B-Chat", "static-b4", "gsm8k", 0.899, 1.0),
]


@pytest.mark.parametrize("model, key, task, accuracy, tpf", PRINTED)
def test_spot_values_match_the_printed_tables(db, model, key, task, accuracy, tpf):
    s = db.for_model(model).setting(key)
    assert s.checkpoint == model or s.checkpoint.endswith("-2507")
    r = s.result(task)
    assert r.accuracy == (None if accuracy is None else pytest.approx(accuracy, abs=1e-9))
    assert r.tpf == pytest.approx(tpf, abs=6e-5)  # 256 / 30 is stored as 8.5333


def test_a_mix_average_is_the_mean_of_its_benchmarks():
    """Every printed average (33-benchmark 'general', the 10 of Table 4) equals the unweighted mean
    of its members' printed numbers, to their rounding: a typo in one member would show."""
    checked = 0
    for p in bundled_profiles():
        for s in p.settings:
            for mix, members in s.source.mixes.items():
                if mix not in s.results:
                    continue
                got = [s.results[t] for t in members]
                assert s.results[mix].tpf == pytest.approx(statistics.fmean(r.tpf for r in got), abs=0.006)
                assert s.results[mix].accuracy == pytest.approx(statistics.fmean(r.accuracy for r in got), abs=1e-4)
                checked += 1
    assert checked == 10  # 4 + 4 LLaDA2.x columns and 2 AR columns with 'general'... and 2 MBE ones


# --- the spread proxy -------------------------------------------------------------------------------

# LLaDA2.1 report Table 2, LLaDA2.1-mini S mode's TPF on each of the 33 benchmarks, in table order
MINI_S_TPF = [3.62, 4.22, 3.39, 4.41, 3.21, 5.02, 3.19, 3.89, 2.48, 5.38, 4.86, 2.59, 1.78, 2.39, 4.28, 5.84,
              4.33, 6.42, 5.85, 10.59, 12.32, 7.23, 7.33, 4.48, 7.98, 6.34, 7.08, 6.82, 4.94, 6.41, 1.83, 7.39, 8.27]


def test_tpf_spread_of_a_33_benchmark_column_by_hand(db):
    assert len(MINI_S_TPF) == 33 and round(statistics.fmean(MINI_S_TPF), 2) == 5.34  # the printed average
    expected = statistics.pstdev(MINI_S_TPF) / statistics.fmean(MINI_S_TPF)
    s = db.for_model("inclusionAI/LLaDA2.1-mini").setting("s-mode")
    assert sorted(mix_tpfs(s)) == sorted(MINI_S_TPF)
    assert tpf_spread(s) == pytest.approx(expected, rel=1e-12)
    assert tpf_spread(s, "general") == pytest.approx(0.4442, abs=5e-5)


def test_tpf_spread_of_two_values_by_hand(tmp_path):
    # TPFs 2 and 4: mean 3, population standard deviation 1, coefficient of variation 1/3
    data = minimal()
    data["sources"]["s"]["tasks"].update(a="a", b="b", mix="the mean of a and b")
    data["sources"]["s"]["mixes"] = {"mix": ["a", "b"]}
    data["settings"][0]["results"].update(a=result(tpf=2.0), b=result(tpf=4.0), mix=result(tpf=3.0))
    s = write(tmp_path, data).settings[0]
    assert tpf_spread(s, "mix") == pytest.approx(1 / 3, rel=1e-12)
    assert tpf_spread(s, "a") is None  # not a mix
    assert tpf_spread(s) is None  # no 'general' mix in this source


def test_no_spread_without_a_mix_and_none_for_ar(db):
    assert tpf_spread(db.for_model("JetLM/SDAR-4B-Chat").default_setting()) is None
    assert tpf_spread(db.for_model("Qwen/Qwen3-8B").setting("ar")) == 0.0  # 33 times TPF 1


# --- lookups ----------------------------------------------------------------------------------------


def test_lookup_by_architecture_or_checkpoint_any_case(db):
    mini = db.for_model("inclusionAI/LLaDA2.0-mini")
    assert db.for_model("INCLUSIONAI/llada2.1-MINI") is mini
    assert db.for_model("d3llm/d3llm_llada").architecture == "GSAI-ML/LLaDA-8B-Instruct"
    assert db.for_model("GSAI-ML/LLaDA-8B-Base") is None
    assert db.for_model("examples/tiny-dlm.yaml") is None
    assert mini.checkpoints() == ["inclusionAI/LLaDA2.0-mini", "inclusionAI/LLaDA2.1-mini"]
    assert mini.tasks()[0] == "general" and "gsm8k" in mini.tasks()
    s = mini.setting("s-mode")
    assert s.label == "LLaDA2.1-mini S mode"
    assert (s.checkpoint, s.mode, s.source.ref) == ("inclusionAI/LLaDA2.1-mini", "S", "arXiv 2602.08676")
    assert s.result("gsm8k") is None and mini.setting("nope") is None


def test_a_users_file_replaces_the_bundled_one_of_its_architecture(tmp_path):
    data = minimal(architecture="inclusionAI/LLaDA2.0-mini")
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    db = ProfileDB.load([str(tmp_path)])
    p = db.for_model("inclusionai/llada2.0-mini")
    assert p.default_setting().key == "k" and db.for_model("inclusionAI/LLaDA2.1-mini") is None
    assert db.for_model("inclusionAI/LLaDA2.0-flash") is not None  # the others stay


# --- hostile files ------------------------------------------------------------------------------------


def result(**over) -> dict:
    return {"accuracy": 0.5, "tpf": 2.0, "location": "Table 1", "verified": True, **over}


def minimal(architecture: str = "org/model") -> dict:
    return {"architecture": architecture,
            "default": {"checkpoint": architecture, "setting": "k", "task": "gsm8k"},
            "checkpoints": {architecture: "the architecture itself"},
            "sources": {"s": {"title": "A paper", "ref": "arXiv 0000.00000", "url": "https://example.org/p",
                              "tpf_counting": "tokens / passes", "tasks": {"gsm8k": "GSM8K, 0-shot"}}},
            "settings": [{"key": "k", "checkpoint": architecture, "name": "threshold 0.9", "scheme": "block",
                          "block": 32, "threshold": 0.9, "gen_length": 256, "source": "s",
                          "results": {"gsm8k": result()}}]}


def write(tmp_path, data, name="p.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return read_profile_file(path)


def test_a_minimal_file_loads(tmp_path):
    p = write(tmp_path, minimal())
    assert p.default_setting().result("gsm8k").tpf == 2.0


def _set(path: str, value):
    def edit(data):
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    return edit


BAD = [
    ("negative TPF", _set("settings.0.results.gsm8k.tpf", -1.0), "settings.0.results.gsm8k.tpf"),
    ("zero TPF", _set("settings.0.results.gsm8k.tpf", 0), "greater than 0"),
    ("accuracy above 1", _set("settings.0.results.gsm8k.accuracy", 72.34), "less than or equal to 1"),
    ("TPF a word", _set("settings.0.results.gsm8k.tpf", "fast"), "valid number"),
    ("TPF true", _set("settings.0.results.gsm8k.tpf", True), "valid number"),
    ("block a float", _set("settings.0.block", 32.5), "valid integer"),
    ("block a string", _set("settings.0.block", "32"), "valid integer"),
    ("verified a word", _set("settings.0.results.gsm8k.verified", "maybe"), "valid boolean"),
    ("TPF infinite", _set("settings.0.results.gsm8k.tpf", float("inf")), "tpf"),
    ("TPF NaN", _set("settings.0.results.gsm8k.tpf", float("nan")), "tpf"),
    ("unknown key at the top", _set("extra", 1), "Extra inputs are not permitted"),
    ("unknown key in a result", _set("settings.0.results.gsm8k.speed", 3), "results.gsm8k.speed"),
    ("unknown key in a setting", _set("settings.0.temperature", 0.0), "settings.0.temperature"),
    ("neither accuracy nor TPF", _set("settings.0.results.gsm8k", {"location": "x", "verified": True}),
     "needs an accuracy, a tpf or both"),
    ("unknown source", _set("settings.0.source", "other"), "unknown source 'other'"),
    ("task not described", _set("settings.0.results.math", result()), "math not described in source 's'"),
    ("task name with spaces", _set("settings.0.results.GSM 8K", result()), "results.GSM 8K"),
    ("control character in a name", _set("settings.0.name", "x\x1b[2J"), "control characters"),
    ("TPF beyond the answer", _set("settings.0.results.gsm8k.tpf", 300.0), "more than the 256 tokens"),
    ("default names no setting", _set("default.setting", "zz"), "no setting has the key 'zz'"),
    ("default task without a TPF", _set("settings.0.results.gsm8k.tpf", None), "has no tokens per forward"),
    ("default of another checkpoint", _set("default.checkpoint", "org/other"), "default.checkpoint"),
    ("unlisted checkpoint", _set("settings.0.checkpoint", "org/twin"), "org/twin has settings but is not listed"),
    ("no settings", _set("settings", []), "settings"),
    ("a bad id", _set("architecture", "not an id"), "architecture"),
    ("a mix of unknown tasks", _set("sources.s.mixes", {"gsm8k": ["a", "b"]}), "not described in tasks"),
]


@pytest.mark.parametrize("why, edit, needle", BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_is_one_clear_error(tmp_path, why, edit, needle):
    data = minimal()
    edit(data)
    with pytest.raises(DecodingProfileError) as exc:
        write(tmp_path, data)
    message = str(exc.value)
    assert needle in message and "\n" not in message and "\x1b" not in message, message
    assert message.startswith("decoding profile ")


def test_a_duplicate_setting_key_is_named(tmp_path):
    data = minimal()
    data["settings"].append({**data["settings"][0], "name": "again"})
    with pytest.raises(DecodingProfileError, match="key 'k' is used twice"):
        write(tmp_path, data)


def test_a_setting_is_named_by_its_key_in_an_error(tmp_path):
    data = minimal()
    data["settings"][0]["results"]["gsm8k"]["tpf"] = -2.0
    with pytest.raises(DecodingProfileError, match=r"\(setting 'k'\)"):
        write(tmp_path, data)


@pytest.mark.parametrize("text, needle", [
    ("[1, 2", "not valid YAML"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
    ("b: " + "[" * 10000 + "]" * 10000 + "\n", "nesting depth"),
    ("architecture: a/b\nsettings: &s [*s]\n", "field 'default'"),  # a list that holds itself
    # nine to the eighth aliases of one list (no memory is spent, none may be walked one by one)
    ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
                                              for p, n in zip("abcdefg", "bcdefgh")) + "settings: *h\n",
     "field 'architecture'"),
])
def test_hostile_text_is_one_line(tmp_path, text, needle):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(DecodingProfileError) as exc:
        read_profile_file(f)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_an_oversized_file_is_refused_before_parsing(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("a: " + "x" * (1 << 20))
    with pytest.raises(DecodingProfileError, match="the limit is 1 MiB"):
        read_profile_file(f)


def test_a_missing_path_or_a_folder_without_files(tmp_path):
    with pytest.raises(DecodingProfileError, match="does not exist"):
        ProfileDB.load([str(tmp_path / "nope.yaml")])
    assert ProfileDB.load([str(tmp_path)]).for_model("inclusionAI/LLaDA2.0-mini") is not None


# --- dlmcost decodings ----------------------------------------------------------------------------


@pytest.fixture
def cli(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def run(*args: str):
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def test_decodings_json_rows_of_one_model_and_task(cli):
    rc, out, err = cli("decodings", "inclusionAI/LLaDA2.1-mini", "--task", "general", "-f", "json")
    assert rc == 0 and err == ""
    rows = json.loads(out)
    # `*` (default) marks what commands decode the model asked about with: LLaDA2.1-mini's own S mode
    assert [(r["checkpoint"], r["setting"], r["accuracy"], r["tpf"], r["default"]) for r in rows] == [
        ("inclusionAI/LLaDA2.0-mini", "t0.95-b32", 0.6339, 2.6, False),
        ("inclusionAI/LLaDA2.1-mini", "s-mode", 0.6207, 5.34, True),
        ("inclusionAI/LLaDA2.1-mini", "q-mode", 0.639, 3.12, False)]
    rc, out, _ = cli("decodings", "inclusionAI/LLaDA2.0-mini", "--task", "general", "-f", "json")
    assert [r["setting"] for r in json.loads(out) if r["default"]] == ["t0.95-b32"]
    cv = statistics.pstdev(MINI_S_TPF) / statistics.fmean(MINI_S_TPF)
    assert rows[1]["tpf_cv"] == pytest.approx(cv, rel=1e-12)
    assert rows[1]["source_ref"] == "arXiv 2602.08676" and rows[1]["label"] == "LLaDA2.1-mini S mode"


def test_exactly_one_row_is_the_default(cli):
    rc, out, _ = cli("decodings", "JetLM/SDAR-4B-Chat", "-f", "json")
    assert [(r["setting"], r["task"]) for r in json.loads(out) if r["default"]] == [("static-b4", "gsm8k")]


def test_decodings_table_marks_the_default_and_unverified_accuracy(cli):
    rc, out, _ = cli("decodings", "mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert rc == 0
    line = next(x for x in out.splitlines() if " gsm8k " in x)
    assert "paper-ar *" in line and "74.40?" in line and "1.00" in line
    assert "TPF CV" not in out  # no benchmark mix here


def test_decodings_of_every_model_filtered_by_task(cli):
    rc, out, _ = cli("decodings", "--task", "gsm8k,humaneval", "-f", "csv")
    assert rc == 0
    assert out.startswith("architecture,checkpoint,setting,")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["task"] for r in rows} == {"gsm8k", "humaneval"}
    assert len(rows) == 53 + 52  # the research's GSM8K and HumanEval rows
    rc, out, _ = cli("decodings", "JetLM/SDAR-4B-Chat", "-f", "markdown")
    assert rc == 0 and out.startswith("| checkpoint | setting |") and "| static-b4 * |" in out


@pytest.mark.parametrize("args, code, needle", [
    (("decodings", "inclusionAI/LLaDA-MoE-7B-A1B-Instruct"), 2, "no published decodings for"),
    (("decodings", "JetLM/SDAR-4B-Chat", "--task", "general"), 2, "its tasks: gsm8k, humaneval, math, mbpp"),
    (("decodings", "--task", " , "), 2, "--task names no task"),
    (("decodings", "-f", "html"), 2, "unknown format"),
])
def test_decodings_refusals(cli, args, code, needle):
    rc, out, err = cli(*args)
    assert rc == code and out == "" and err.startswith("error: ") and needle in err and err.count("\n") == 1


def test_decodings_reads_a_users_file_and_refuses_a_bad_one(cli, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(minimal()))
    rc, out, _ = cli("decodings", "org/model", "--decoding-profiles", good, "-f", "json")
    assert rc == 0 and json.loads(out)[0]["tpf"] == 2.0
    data = minimal()
    data["settings"][0]["results"]["gsm8k"]["accuracy"] = 1.5
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    rc, out, err = cli("decodings", "--decoding-profiles", bad)
    assert rc == 5 and out == "" and err.count("\n") == 1 and "results.gsm8k.accuracy" in err
    data = minimal()
    data["settings"][0]["scheme"] = "warp-drive"
    bad.write_text(yaml.safe_dump(data))
    rc, _, err = cli("decodings", "--decoding-profiles", bad)
    assert rc == 5 and "scheme 'warp-drive'" in err


def test_tpf_cv_in_records_is_the_spread_function(cli, db):
    rc, out, _ = cli("decodings", "inclusionAI/LLaDA2.0-flash", "--task", "general", "-f", "json")
    for row in json.loads(out):
        s = db.for_model(row["checkpoint"]).setting(row["setting"])
        assert math.isclose(row["tpf_cv"], tpf_spread(s))
