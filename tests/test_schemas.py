"""Every command's `--format json` validates against the schema `dlmcost schema COMMAND` prints,
and one vocabulary holds across outputs: a key means the same, in the direction its name says, in
the table, JSON, CSV, `--require` and the API.

The schemas come from the typed records (dlmcost/results.py, dlmcost/documents.py); the output is
validated here by an independent validator (jsonschema), in the strictest form the schema allows:
no key the schema does not name (`additionalProperties: false`), every required key present.
"""

from __future__ import annotations

import csv
import io
import json
import warnings

import jsonschema
import pytest

from dlmcost import api
from dlmcost.documents import SCHEMAS
from dlmcost.results import SCHEMA_VERSION

MODEL = "GSAI-ML/LLaDA-8B-Instruct"
COMMANDS = {
    "analyze": ["analyze", "--gpu", "h100,tpu-v5e", "--precision", "fp8"],  # a supported and an unsupported entry
    "sweep": ["sweep", "--gpu", "h100", "--scheme", "ar,mdm,dual-cache", "--block", "8,32"],
    "serve": ["serve", "--gpu", "h100", "-c", "2,8", "--requests", "200", "--p95", "1", "--max-rate"],
    "plan": ["plan", "--rate", "2", "--gpu", "h100", "--tp", "1", "--precision", "bf16", "--ar-baseline",
             "--requests", "200"],
    "gpus": ["gpus"],
    "stacks": ["stacks"],
    "decodings": ["decodings", "inclusionAI/LLaDA2.0-mini", "--task", "general,gsm8k"],
    "models": ["models"],
    "model": ["model", "deepseek-ai/DeepSeek-V3"],  # MoE and MLA blocks, the sampler
    "schemes": ["schemes"],
    "calibrate": ["calibrate", "examples/measurements.yaml", "--out", "{tmp}/calibrated.yaml"],
    "measure": ["measure", "examples/tiny-dlm.yaml", "--gpu", "generic-cpu", "--hardware", "examples/generic-cpu.yaml",
                "--repeats", "1", "--warmup", "0"],
}



def schema_of(run, command: str) -> dict:
    rc, out, err = run("schema", command)
    assert rc == 0, err
    return json.loads(out)


def test_every_command_with_json_output_has_a_schema(run):
    assert set(COMMANDS) == set(SCHEMAS)
    rc, _, err = run("schema", "nonsense")
    assert rc == 2 and "serve" in err and "plan" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_json_output_validates_against_its_schema(run, tmp_path, command):
    args = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    rc, out, err = run(*args, "-f", "json")
    assert rc in (0, 8), err  # serve's --p95 1 is missed (exit 8): its JSON is printed all the same
    document = json.loads(out)
    schema = schema_of(run, command)
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
    if isinstance(document, dict):
        assert next(iter(document)) == "schema_version" and document["schema_version"] == SCHEMA_VERSION


def test_a_key_the_schema_does_not_name_is_refused():
    """The validator above is not lenient: the schemas forbid unknown keys."""
    schema = api.analyze(MODEL, "h100").model_json_schema()
    document = json.loads(api.analyze(MODEL, "h100").model_dump_json())
    document["results"][0]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


# --- speed-up over AR: one name, one direction ---------------------------------------------------


def test_speedup_vs_ar_means_faster_above_one_everywhere(run):
    """LLaDA's default mdm is about half as fast as AR decode: the table printed 0.497 while JSON's
    `time_ratio_to_ar` said 2.01 and `--require 'time_ratio_to_ar >= 1'` passed it. Now the table's
    speed-up, JSON's and CSV's `speedup_vs_ar` and the API agree, below 1, and a gate on it fails."""
    result = api.analyze(MODEL, "h100")
    r = result.results[0]
    speedup = r.ar_time_s / r.time_s  # AR latency / latency, from the result's own two times
    assert 0.4 < speedup < 0.6
    assert r.speedup_vs_ar == pytest.approx(speedup, rel=1e-12)
    rc, out, _ = run("analyze", "--gpu", "h100", "-f", "json")
    assert json.loads(out)["results"][0]["speedup_vs_ar"] == pytest.approx(speedup, rel=1e-12)
    rc, out, _ = run("analyze", "--gpu", "h100", "-f", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert float(row["speedup_vs_ar"]) == pytest.approx(speedup, rel=1e-12)
    rc, out, _ = run("analyze", "--gpu", "h100")
    assert f" {speedup:.3g} " in out  # the table's "speed-up vs AR" column
    rc, _, err = run("analyze", "--gpu", "h100", "--require", "speedup_vs_ar >= 1")
    assert rc == 8 and f"speedup_vs_ar >= 1 (got {speedup:.4g})" in err
    rc, out, _ = run("sweep", "--gpu", "h100", "--scheme", "ar,mdm", "-f", "csv")
    rows = {r["scheme"]: r for r in csv.DictReader(io.StringIO(out))}
    assert float(rows["mdm"]["speedup_vs_ar"]) == pytest.approx(speedup, rel=1e-9)
    assert float(rows["ar"]["speedup_vs_ar"]) == pytest.approx(1.0)


def test_the_old_key_is_a_deprecated_alias_for_one_release(run):
    r = api.analyze(MODEL, "h100").results[0]
    with pytest.warns(DeprecationWarning):
        old = r["time_ratio_to_ar"]
    assert old == pytest.approx(1 / r.speedup_vs_ar, rel=1e-12)  # its old meaning, unchanged
    rc, out, _ = run("sweep", "--gpu", "h100", "--scheme", "mdm", "-f", "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert float(row["time_ratio_to_ar"]) == pytest.approx(1 / float(row["speedup_vs_ar"]), rel=1e-9)
    # accepted by --require, with a warning that says what to write instead
    rc, _, err = run("analyze", "--gpu", "h100", "--require", "time_ratio_to_ar >= 1")
    assert rc == 0
    assert "warning:" in err and "'time_ratio_to_ar' is deprecated" in err and "speedup_vs_ar" in err
    rc, _, err = run("sweep", "--gpu", "h100", "--scheme", "mdm", "--require", "time_ratio_to_ar < 1")
    assert rc == 8 and "deprecated" in err
    schema = schema_of(run, "analyze")
    assert schema["$defs"]["GPUResult"]["properties"]["time_ratio_to_ar"]["deprecated"] is True
    # the unknown-key message lists the current keys, not the deprecated one
    rc, _, err = run("analyze", "--gpu", "h100", "--require", "speedup >= 1")
    assert rc == 2 and "speedup_vs_ar" in err and "time_ratio_to_ar" not in err


def test_plan_names_its_batch_limit_as_serve_does(run):
    """plan's `max_batch` was the batch limit (serve's --max-running) while sweep's `max_batch` is
    the largest batch that fits in memory: plan now says `max_running`, keeping the old key for one
    release."""
    rc, out, _ = run("plan", "--rate", "1", "--gpu", "h100", "--tp", "1", "--precision", "bf16",
                     "--scheme", "dual-cache", "--max-batch", "16", "--requests", "200", "-f", "json")
    assert rc == 0
    best = json.loads(out)["deployments"][0]
    assert best["max_running"] == best["max_batch"] == 16
    schema = schema_of(run, "plan")
    assert schema["$defs"]["PlanDeployment"]["properties"]["max_batch"]["deprecated"] is True


def test_models_and_model_say_provenance_alike(run):
    """`models` said "reconstructed" where `model` said "verified: True": both now say the
    config's provenance, in the same words."""
    rc, out, _ = run("models", "-f", "json")
    entries = {e["id"]: e for e in json.loads(out)}
    assert entries["GSAI-ML/LLaDA-8B-Base"]["provenance"] == "reconstructed"
    assert entries["GSAI-ML/LLaDA-8B-Instruct"]["provenance"] == "verbatim"
    assert entries["inclusionAI/LLaDA-MoE-7B-A1B-Instruct"]["provenance"] == "unverified"
    rc, out, _ = run("model", "GSAI-ML/LLaDA-8B-Base", "-f", "json")
    assert json.loads(out)["provenance"] == "reconstructed"
    rc, out, _ = run("model", "GSAI-ML/LLaDA-8B-Base")
    lines = {line.split()[0]: line.split()[1] for line in out.splitlines()[3:] if len(line.split()) == 2}
    assert lines["provenance"] == "reconstructed" and "verified" not in lines
    rc, out, _ = run("models")
    assert "provenance" in out and "LLaDA-8B-Base" in out
    rc, out, _ = run("model", "examples/tiny-dlm.yaml", "-f", "json")
    assert json.loads(out)["provenance"] == "local"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the summary every result carries reads without deprecations
        assert api.analyze("GSAI-ML/LLaDA-8B-Base", "h100").model.provenance == "reconstructed"
