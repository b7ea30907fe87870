"""A stack file that `extends:` a bundled stack: the bundled sglang-pcg (sglang with graphed
prefills), a user's own file over a bundled one, and the files that cannot be read as one."""

import json

import pytest
import yaml

from dlmcost.inputs import stacks
from dlmcost.inputs.bundled import bundled_stack_dir


def test_sglang_pcg_is_sglang_with_prefills_graphed():
    """Every field of sglang-pcg is sglang's but the ones its file sets: the names, the graphed
    prefills and that one source (compared field by field on the validated models)."""
    base, pcg = stacks.load_stack("sglang").model_dump(), stacks.load_stack("sglang-pcg").model_dump()
    own = yaml.safe_load((bundled_stack_dir() / "sglang-pcg.yaml").read_text(encoding="utf-8"))
    assert own["extends"] == "sglang" and base["prefill_graphs"] is False and pcg["prefill_graphs"] is True
    differ = {k for k in base if base[k] != pcg[k]}
    assert differ == {"name", "description", "version", "prefill_graphs", "sources"}
    assert {k for k in base["sources"] if base["sources"][k] != pcg["sources"][k]} == {"prefill_graphs"}
    assert stacks.bundled_base("sglang-pcg") == "sglang" and stacks.bundled_base("sglang") == "sglang"


def test_graphed_prefills_save_the_eager_dispatch_by_hand(run):
    """One request, its 1,000-token prompt prefilled alone on 2x GB300: sglang charges the eager
    dispatch of MiniMax-M2.5's 62 MoE layers (292 + 346 us each, stacks/sglang.yaml's `prefill_eager:`)
    and of its 62 x 2 + 1 all-reduces (15 us each); sglang-pcg replays the prefill from graphs, so its
    first token comes 62 x 638 + 125 x 15 = 41,431 us sooner, and nothing else moves."""
    common = ["serve", "MiniMaxAI/MiniMax-M2.5", "--gpu", "gb300", "--tp", "2", "--precision", "fp8", "--prompt",
              "1000", "--answer", "16", "--job", "1", "--parallel", "1", "-f", "json"]
    points = {}
    for stack in ("sglang", "sglang-pcg"):
        rc, out, err = run(*common, "--stack", stack)
        assert rc == 0, err
        points[stack] = json.loads(out)["deployments"][0]["points"][0]
    saved = points["sglang"]["ttfb_s"]["mean"] - points["sglang-pcg"]["ttfb_s"]["mean"]
    assert saved == pytest.approx((62 * (292 + 346) + 125 * 15) * 1e-6, abs=1e-9)
    # decode graphed in both: the same gaps (to the float rounding of a sum taken in another order)
    assert points["sglang"]["inter_block_s"] == pytest.approx(points["sglang-pcg"]["inter_block_s"], rel=1e-12)


def test_sglang_pcg_takes_sglangs_error_band(run):
    """Its numbers count in sglang's band and it draws its ranges from that band (the header)."""
    rc, out, err = run("serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", "sglang-pcg", "-c", "1",
                       "--prompt", "128", "--answer", "16", "--requests", "100")
    assert rc == 0, err
    from dlmcost.inputs.error_bands import published_band_for

    sg = published_band_for("sglang", "NVIDIA")
    assert f"{sg.low:.2f}–{sg.high:.2f}×" in " ".join(out.split()), out


def test_a_users_file_over_a_bundled_stack(tmp_path, run):
    """A file of a few fields over sglang: mappings merged key by key (host keeps its other
    numbers), anything else replaced; it runs as a stack file does."""
    f = tmp_path / "mine.yaml"
    f.write_text("extends: sglang\nname: mine\nhost: {fixed_us_per_forward: 400}\nmax_running_requests: 8\n"
                 "sources: {fixed: my own measurement, max_running_requests: my launch}\n")
    mine, base = stacks.load_stack(str(f)), stacks.load_stack("sglang")
    assert (mine.name, mine.host.fixed_us_per_forward, mine.max_running_requests) == ("mine", 400, 8)
    assert mine.host.overlaps_gpu == base.host.overlaps_gpu and mine.host.us_per_layer == base.host.us_per_layer
    assert mine.sources["fixed"] == "my own measurement" and mine.sources["host"] == base.sources["host"]
    assert mine.eager == base.eager and mine.gemm_efficiency == base.gemm_efficiency
    rc, out, err = run("serve", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", str(f), "-c", "1", "--prompt", "128",
                       "--answer", "16", "--requests", "100")
    assert rc == 0 and f"running ≤ 8 per replica ({f}'s default" in " ".join(out.split()), (out, err)


@pytest.mark.parametrize("text, says", [
    ("extends: nonesuch\nname: x\n", "extends: 'nonesuch' is no bundled stack (one of compiled, "),
    ("extends: [sglang]\nname: x\n", "extends: '['sglang']' is no bundled stack"),
    ("extends: sglang\n", "a stack that extends sglang needs a name of its own"),
    ("extends: sglang\nname: sglang\n", "a stack that extends sglang needs a name of its own"),
    ("extends: sglang\nname: vllm\n", "not 'vllm', which names a bundled stack"),  # printed "stack": "vllm" for sglang's numbers
    ("extends: sglang\nname: \"mine (eager)\\t\"\n", "the mark --eager gives"),  # printed as if run eagerly
    ("extends: sglang\nname: none\n", "not 'none', which names a bundled stack (`none`: the bare roofline)"),  # the bare roofline's name
    ("extends: sglang\nname: x\nhost: {us_per_layer: -1}\n", "us_per_layer"),
    # a time is divided by each: 5e-324 made every pass inf (exit 3, naming no field of the file)
    ("extends: sglang\nname: x\nattention_efficiency: 5.0e-324\n", "field 'attention_efficiency'"),
    ("extends: sglang\nname: x\ngemm_efficiency: {rows: [1.0], efficiency: [5.0e-324]}\n", "in [1e-12, 1]"),
    ("extends: sglang\nname: x\nfused_moe: {fp8_rate: 5.0e-324}\n", "field 'fused_moe.fp8_rate'"),
])
def test_a_file_that_cannot_extend_gets_one_line(tmp_path, run, text, says):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    rc, out, err = run("analyze", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", str(f))
    assert rc == 5 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_stacks_that_extend_in_a_circle_are_refused(tmp_path, monkeypatch):
    """Bundled stacks extending each other round (or deeper than the limit) end in one error."""
    (tmp_path / "a.yaml").write_text("extends: b\nname: a\n")
    (tmp_path / "b.yaml").write_text("extends: a\nname: b\n")
    monkeypatch.setattr(stacks, "bundled_stack_dir", lambda: tmp_path)
    with pytest.raises(stacks.StackFileError, match=r"extends: b -> a -> b goes round"):
        stacks.read_stack_file(tmp_path / "a.yaml")
    assert stacks.bundled_base("a") in ("a", "b")  # bounded, whatever the circle


@pytest.mark.parametrize("bundled, name", [("sglang", "sglang"), ("vllm", "sglang"), ("vllm", "none")])
def test_a_file_of_its_own_cannot_take_a_bundled_name(tmp_path, run, bundled, name):
    """Without `extends:` too: a copy of a bundled file (its own numbers, or another stack's) under
    a bundled stack's name printed as that stack, its error band and all."""
    text = (bundled_stack_dir() / f"{bundled}.yaml").read_text(encoding="utf-8")
    f = tmp_path / "mine.yaml"
    f.write_text(text.replace(f"\nname: {bundled}\n", f"\nname: {name}\n"))
    rc, out, err = run("analyze", "Qwen/Qwen3-8B", "--gpu", "h100", "--stack", str(f))
    assert (rc, out) == (5, "")
    assert err == (f"error: stack file {f}: a stack file needs a name of its own (`name:`), not '{name}', which "
                   "names a bundled stack (`none`: the bare roofline): its outputs would pass for that one's\n")


def test_bundled_files_keep_their_own_names():
    for name in stacks.bundled_stack_names():
        assert stacks.read_stack_file(bundled_stack_dir() / f"{name}.yaml").name == name
