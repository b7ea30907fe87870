"""Prices with their doubt (issue 29): how old each list price is, `dlmcost gpus` showing it and
warning on one over a year old (a fixed clock), and plans that leave out the accelerators their
software stack does not run on (`runs_on` in stacks/*.yaml). $/Mtok over the price range is
pinned in tests/test_serve.py and tests/test_plan.py."""

from __future__ import annotations

import datetime
import json

import pytest

from dlmcost.analysis import catalog
from dlmcost.cli import main
from dlmcost.inputs.hardware import HardwareDB, Price
from dlmcost.inputs.stacks import StackFileError, default_stack_for, load_stack, validate_stack

TODAY = datetime.date(2026, 12, 6)


def run(capsys, *args):
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(("as_of", "day"), [
    ("2026-10-03", datetime.date(2026, 10, 3)), ("2026-05", datetime.date(2026, 5, 1)),
    ("2025 (catalog v7)", datetime.date(2025, 1, 1)), ("spring", None), ("2026-13-40", None),
])
def test_a_price_date_counts_from_the_first_day_it_names(as_of, day):
    assert Price(usd=1.0, as_of=as_of, source="s").dated == day


def test_price_ages_by_hand():
    """Gaudi 3's price is dated 2025-02-28: 365 days to 2026-02-28, then 281 to 2026-12-06 (March
    to November: 31 + 30 + 31 + 30 + 31 + 31 + 30 + 31 + 30, and 6); A10G's '2025 (catalog v7)'
    counts from 2025-01-01: 365 + 339. Over a year (365 days) is stale, a year exactly is not."""
    db = HardwareDB.load()
    gpus = [db.get("gaudi-3"), db.get("a10g"), db.get("h100"), db.get("h20")]
    with pytest.warns(Warning) as caught:
        ages = catalog.price_ages(gpus, on=TODAY)
    assert ages == {"gaudi-3": dict(days=646, stale=True), "a10g": dict(days=704, stale=True),
                    "h100-sxm": dict(days=64, stale=False), "h20": dict(days=None, stale=False)}
    assert [str(w.message).split(" (")[0] for w in caught] == ["the list price of Gaudi 3", "the list price of A10G"]
    assert catalog.price_ages([db.get("gaudi-3")], on=datetime.date(2026, 2, 28))["gaudi-3"] == dict(days=365,
                                                                                                   stale=False)


def test_gpus_shows_each_price_and_its_date_and_warns_on_old_ones(capsys, monkeypatch):
    """Issue 29: the hardware files' prices, dates and ranges reached no output. The table shows
    the list price and its date ('!' when over a year old), JSON the whole price with its range,
    age and staleness, and each stale price gets one warning line naming its date: here with the
    clock at 2026-12-06, and a year later, when every bundled price has gone stale."""
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setattr(catalog, "today", lambda: TODAY)
    rc, out, err = run(capsys, "gpus")
    assert rc == 0
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "2025-02-28!" in rows["Gaudi 3"] and " 2.49 " in rows["Gaudi 3"]
    assert "2026-10-03 " in rows["H100 SXM"] and " 3.99 " in rows["H100 SXM"] and "!" not in rows["H100 SXM"]
    assert err.splitlines() == [
        "warning: the list price of Gaudi 3 ($2.49/h) is dated 2025-02-28, 646 days before 2026-12-06: list prices "
        "move, check it (`dlmcost plan --price gaudi-3=USD` plans with yours)",
        "warning: the list price of A10G ($1.01/h) is dated 2025 (catalog v7), 704 days before 2026-12-06: list "
        "prices move, check it (`dlmcost plan --price a10g=USD` plans with yours)"]
    rc, out, _ = run(capsys, "gpus", "-f", "json")
    h100 = next(g for g in json.loads(out) if g["key"] == "h100-sxm")
    assert h100["price_per_hour"] | dict(source="") == dict(usd=3.99, low=2.29, high=11.06, as_of="2026-10-03",
                                                             source="", estimate=True)
    assert (h100["price_age_days"], h100["price_stale"]) == (64, False)
    monkeypatch.setattr(catalog, "today", lambda: datetime.date(2027, 12, 6))
    rc, _, err = run(capsys, "gpus", "-f", "csv")
    priced = [g for g in HardwareDB.load().gpus.values() if g.price_per_hour is not None]
    assert rc == 0 and len(err.splitlines()) == len(priced)


def test_stacks_say_what_they_run_on():
    """Every bundled stack names the vendors it runs on, with a source; a user's stack that does
    not say runs anywhere; one that says so without a source is refused."""
    assert load_stack("sglang").runs_on == ["nvidia", "amd"] and load_stack("jax-tpu").runs_on == ["google"]
    for name in ("sglang", "sglang-dllm", "vllm-dllm", "compiled", "hf-eager", "jax-tpu"):
        stack = load_stack(name)
        assert stack.runs_on and stack.sources["runs_on"]
    sglang = load_stack("sglang")
    assert sglang.runs("NVIDIA") and sglang.runs("AMD") and not sglang.runs("AWS") and not sglang.runs("Google")
    data = sglang.model_dump()
    assert validate_stack(dict(data, runs_on=None)).runs("AWS")
    with pytest.raises(StackFileError, match="needs a source for: runs_on"):
        validate_stack(dict(data, sources={k: v for k, v in data["sources"].items() if k != "runs_on"}))
    assert default_stack_for({"Google"}) == "jax-tpu"
    # else each decoding its kind's default (None): SGLang's, which runs on NVIDIA and AMD
    assert default_stack_for({"Google", "NVIDIA"}) is default_stack_for({"AWS"}) is None


def test_default_plan_leaves_out_what_the_stack_does_not_run_on():
    """Issue 29: the default plan searched Trainium2 and Gaudi 3 (and TPUs) under a CUDA engine's
    profile. Without a GPU list, sglang's plan searches the priced data-centre NVIDIA and AMD
    parts and names the others; jax-tpu's searches the TPUs."""
    from dlmcost.plan.scenario import build_space_and_pricing, read_scenario
    from dlmcost.serving.steptime import Decoding

    db = HardwareDB.load()
    priced = [g for g in db.gpus.values() if g.price_per_hour is not None and g.segment == "datacenter"]
    space, _ = build_space_and_pricing(read_scenario(None, {}), [Decoding("block", 32, 2.0)], db,
                                       stack=load_stack("sglang"))
    assert [g.name for g in space.gpus] == [g.name for g in priced if g.vendor in ("NVIDIA", "AMD")]
    assert [g.name for g in space.left_out] == [g.name for g in priced if g.vendor not in ("NVIDIA", "AMD")]
    assert {"Trainium2", "Gaudi 3", "TPU v6e"} <= {g.name for g in space.left_out}
    space, _ = build_space_and_pricing(read_scenario(None, {}), [Decoding("block", 32, 2.0)], db,
                                       stack=load_stack("jax-tpu"))
    assert {g.vendor for g in space.gpus} == {"Google"}


def test_plan_header_names_what_was_left_out_and_the_way_back():
    from dlmcost.render.plan import left_out_line

    search = dict(stack="sglang", runs_on=["AMD", "NVIDIA"],
                  left_out=[dict(gpu="Trainium2", vendor="AWS", stack=None),
                            dict(gpu="TPU v6e", vendor="Google", stack="jax-tpu")])
    assert left_out_line(search) == (
        "\nleft out: 2 accelerators the sglang stack does not run on (Trainium2, TPU v6e; it runs on AMD and NVIDIA "
        "parts): --gpu NAME plans one, and Google parts named alone plan with the jax-tpu stack")
    assert left_out_line(dict(search, left_out=[])) == ""


def test_a_plan_on_tpus_runs_jax_and_one_off_the_stack_warns(capsys):
    """TPUs named alone plan with jax-tpu; a part the stack does not run on, named, is planned,
    with a warning."""
    small = ["plan", "GSAI-ML/LLaDA-8B-Instruct", "--tpf", "2", "--rate", "1", "--p95", "60", "--tp", "1",
             "--precision", "bf16", "--requests", "100", "-f", "json"]
    rc, out, err = run(capsys, *small, "--gpu", "tpu-v6e")
    assert rc == 0 and json.loads(out)["search"]["stack"] == "jax-tpu" and not err
    rc, out, err = run(capsys, *small, "--gpu", "trainium2,h100")
    assert rc == 0 and json.loads(out)["search"]["stack"] == "default"
    assert json.loads(out)["search"]["stacks"] == {"mdm/2": "sglang-dllm"}
    assert err == ("warning: the sglang-dllm stack does not run on Trainium2 (AWS): its times there are those of an "
                   "engine that is not there (--stack names another)\n")


def test_serve_analyze_and_sweep_on_tpus_run_jax_as_plan_does(capsys):
    """serve, analyze and sweep on a TPU alone took the CUDA engine's profile without a word, where
    plan takes jax-tpu (stacks.default_stack_for): each now takes jax-tpu; a list that mixes parts
    keeps the decoding's default; serve with a stack named that does not run on its part warns, as
    plan does."""
    rc, out, err = run(capsys, "serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "tpu-v6e", "-c", "4", "--requests", "100",
                       "-f", "json")
    assert rc == 0 and not err and json.loads(out)["deployments"][0]["deployment"]["stack"] == "jax-tpu"
    rc, out, err = run(capsys, "analyze", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "tpu-v6e", "-f", "json")
    assert rc == 0 and json.loads(out)["stack"] == "jax-tpu" and json.loads(out)["stack_default"] is True
    rc, out, err = run(capsys, "analyze", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100,tpu-v6e", "-f", "json")
    assert rc == 0 and json.loads(out)["stack"] == "sglang-dllm"
    rc, out, err = run(capsys, "sweep", "--gpu", "tpu-v6e", "--block", "8", "-f", "json")
    assert rc == 0 and json.loads(out)["stack"] == json.loads(out)["ar_stack"] == "jax-tpu"
    rc, out, err = run(capsys, "serve", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "tpu-v6e", "--stack", "sglang", "-c", "4",
                       "--requests", "100", "-f", "json")
    assert rc == 0 and err == ("warning: the sglang stack does not run on TPU v6e (Google): its times there are those "
                               "of an engine that is not there (--stack names another)\n")


def test_a_price_given_for_a_gpu_not_searched_warns_and_the_caption_says_whose_prices(capsys):
    """plan --gpu h100 --price b200=3 planned without a word about the B200's price, which changes
    nothing; and with --price the caption still said every price was a dated list-price estimate."""
    from dlmcost.render.plan import prices_said

    small = ["plan", "GSAI-ML/LLaDA-8B-Instruct", "--rate", "1", "--p95", "100", "--tp", "1", "--precision", "bf16",
             "--requests", "100"]
    rc, out, err = run(capsys, *small, "--gpu", "h100", "--price", "b200=3", "-f", "json")
    assert rc == 0 and err == ("warning: a price is given for B200, which the plan does not search: it changes "
                               "nothing (--gpu names the GPUs searched)\n")
    rc, out, err = run(capsys, *small, "--gpu", "h100,mi300x", "--price", "h100=2")
    assert rc == 0 and not err
    said = " ".join(out.split())
    assert "prices: as given for H100 SXM, dated list-price estimates for the rest;" in said
    user, listed = dict(gpu="H100 SXM", price_source="user"), dict(gpu="MI300X", price_source="list price")
    assert prices_said([listed]) == "dated list-price estimates"
    assert prices_said([user, user]) == "as given for H100 SXM"
