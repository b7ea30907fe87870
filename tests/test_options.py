"""One option, one meaning across commands: a list wherever any command takes a list, 0 = all
wherever a count limits what is shown or replayed, and a warning (an error where it cannot run)
for combinations that cannot mean what they say."""

from __future__ import annotations

import csv
import io
import json

import pytest


MODEL = "GSAI-ML/LLaDA-8B-Instruct"



def test_sweep_tpf_takes_a_list_like_plan(run):
    """`sweep --tpf` took one number where `plan --tpf` takes a list; each value now makes its rows,
    with S = Lg / tpf where the scheme reads steps (AR reads none: one row)."""
    rc, out, err = run("sweep", "--gpu", "h100", "--scheme", "ar,mdm,dual-cache", "--block", "32",
                       "--gen", "128", "--tpf", "1,2,4", "-f", "csv")
    assert rc == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    steps = {(r["scheme"], r["steps"]) for r in rows}
    assert steps == {("ar", ""), ("mdm", "128.0"), ("mdm", "64.0"), ("mdm", "32.0"),
                     ("dual-cache", "128.0"), ("dual-cache", "64.0"), ("dual-cache", "32.0")}
    rc, out, _ = run("sweep", "--gpu", "h100", "--scheme", "mdm", "--gen", "128", "--tpf", "2", "-f", "json")
    doc = json.loads(out)
    assert [r["steps"] for r in doc["rows"]] == [64.0] and doc["settings"]["tpf"] == [2.0]
    rc, _, err = run("sweep", "--gpu", "h100", "--tpf", "2", "--steps", "8")
    assert rc == 2 and "not both" in err


def test_serve_takes_lists_where_plan_does(run):
    rc, out, err = run("serve", MODEL, "--gpu", "h100", "-c", "4", "--requests", "200", "--scheme",
                       "mdm,dual-cache", "--block", "32", "--tpf", "1,2", "-f", "json")
    assert rc == 0, err
    decodings = [e["deployment"]["decoding"] for e in json.loads(out)["deployments"]]
    assert decodings == ["mdm/1", "mdm/2", "dual-cache/32/1", "dual-cache/32/2"]


def test_serve_sample_0_replays_the_whole_trace(run):
    rc, out, err = run("serve", MODEL, "--gpu", "h100", "--trace", "examples/traces/azure-conv.csv",
                       "--sample", "0", "-f", "json")
    assert rc == 0, err
    with open("examples/traces/azure-conv.csv") as f:
        assert json.loads(out)["deployments"][0]["points"][0]["requests"] == sum(1 for _ in f) - 1


@pytest.mark.parametrize("args, warning", [
    (["analyze", "--gpu", "h100", "--steps", "1000", "--gen", "128"],
     "1000 steps for 128 generated tokens: more passes than tokens"),
    (["analyze", "--gpu", "h100", "--scheme", "ar", "--block", "32"], "--block does nothing for the ar scheme"),
    (["analyze", "--gpu", "h100", "--scheme", "block", "--block", "32", "--window", "4"],
     "--window does nothing for the block scheme"),
    (["sweep", "--gpu", "h100", "--scheme", "ar", "--block", "8,32"], "--block does nothing for the ar scheme"),
    (["sweep", "--gpu", "h100", "--scheme", "mdm", "--gen", "128", "--steps", "64,1000"],
     "1 configuration(s) have more steps than generated tokens"),
    (["serve", MODEL, "--gpu", "h100", "-c", "4", "--requests", "200", "--scheme", "ar", "--block", "32"],
     "--block does nothing for the ar scheme"),
    (["serve", MODEL, "--gpu", "h100", "-c", "4", "--requests", "200", "--scheme", "dual-cache", "--block", "32",
      "--tpf", "0.5"], "dual-cache at 0.5 tokens per forward: more passes than tokens"),
    (["plan", MODEL, "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--requests", "200",
      "--scheme", "ar", "--block", "32"], "--block does nothing for the ar scheme"),
])
def test_combinations_that_cannot_mean_what_they_say_warn(run, args, warning):
    rc, _, err = run(*args)
    assert rc == 0, err
    assert f"warning: {warning}" in err


@pytest.mark.parametrize("args", [
    ["analyze", "--gpu", "h100", "--scheme", "dual-cache", "--block", "32"],
    ["sweep", "--gpu", "h100", "--scheme", "mdm,dual-cache", "--block", "32"],  # mdm ignores it, dual-cache reads it
    ["analyze", "--gpu", "h100", "--steps", "128", "--gen", "128"],
])
def test_meaningful_combinations_do_not_warn(run, args):
    rc, _, err = run(*args)
    assert rc == 0 and "warning" not in err


def test_an_impossible_combination_is_an_error(run):
    """Draft and verify accepts at least the verifier's own token per iteration: fewer is impossible."""
    rc, _, err = run("analyze", "--gpu", "h100", "--scheme", "draft-verify", "--tpf", "0.5")
    assert rc == 3 and "fewer than the one every iteration accepts" in err
    rc, _, err = run("serve", MODEL, "--gpu", "h100", "-c", "4", "--requests", "200", "--scheme",
                     "draft-verify", "--block", "8", "--tpf", "0.5")
    assert rc == 2 and "fewer than the one every iteration" in err
