"""A decoding scheme is named in any case, blanks around it ignored, on every command and in the
API, as precisions are (`--scheme AR` is ar, as `--precision FP8` is fp8): the same answer as the
registered name gives. An unknown name is still one line and exit 2."""

import json

import pytest

from dlmcost import api
from dlmcost.engine.schemes import get_scheme, scheme_name
from test_cli import DLMCOST_SCHEMA_YAML


@pytest.mark.parametrize("written,name", [("AR", "ar"), (" Block ", "block"), ("Prefix-Cache", "prefix-cache")])
def test_the_registered_name_of_what_a_user_writes(written, name):
    assert scheme_name(written) == name
    assert get_scheme(written) is get_scheme(name)


@pytest.mark.parametrize("args,written", [
    (("analyze", "--gpu", "h100", "--scheme", "{}", "--gen", "32"), "AR"),
    # the model's published decoding (tokens per forward, block) and its sampler's block follow the name
    (("analyze", "inclusionAI/LLaDA2.0-mini", "--gpu", "h100", "--scheme", "{}"), "BLOCK"),
    (("analyze", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--scheme", "{}"), "MDM"),
    (("sweep", "--gpu", "h100", "--scheme", "{}", "--block", "8", "--gen", "32"), " Block"),
    (("serve", "--gpu", "h100", "--scheme", "{}", "--rate", "1", "--requests", "200"), "AR"),
    (("plan", "GSAI-ML/LLaDA-8B-Instruct", "--gpu", "h100", "--tp", "1", "--scheme", "{}", "--rate", "1",
      "--requests", "200", "--jobs", "1"), "Dual-Cache"),
])
def test_every_command_takes_a_scheme_in_any_case(run, args, written):
    answers = []
    for name in (written, scheme_name(written)):
        rc, out, err = run(*[name if a == "{}" else a for a in args], "-f", "json")
        assert rc == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1]


def test_the_api_takes_a_scheme_in_any_case():
    given = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="MDM", gen=32)
    registered = api.analyze("GSAI-ML/LLaDA-8B-Instruct", "h100", scheme="mdm", gen=32)
    assert given["results"][0]["time_s"] == registered["results"][0]["time_s"]
    assert given["workload"].scheme == "mdm"


@pytest.mark.parametrize("command", [("analyze", "--gpu", "h100"), ("serve", "--gpu", "h100", "--rate", "1")])
def test_an_unknown_scheme_is_still_one_line_exit_2(run, command):
    rc, out, err = run(*command, "--scheme", "Foo")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "scheme" in err


def model_file(scheme: str, schemes: str) -> str:
    """test_cli's local model file, its sampler naming `scheme` and listing `schemes`."""
    text = DLMCOST_SCHEMA_YAML.replace("  scheme: mdm\n", f"  scheme: {scheme}\n  schemes: [{schemes}]\n")
    assert text != DLMCOST_SCHEMA_YAML
    return text


def test_a_model_files_sampler_names_its_schemes_in_any_case(run, tmp_path):
    """A local model file whose sampler says 'MDM' and ' Block ' runs as the one saying mdm and block
    (it was refused: the file's names had to be lower case)."""
    answers = []
    for scheme, schemes in (("MDM", "MDM, ' Block '"), ("mdm", "mdm, block")):
        path = tmp_path / f"tiny-{scheme}.yaml"
        path.write_text(model_file(scheme, schemes), encoding="utf-8")
        rc, out, err = run("sweep", "--model", str(path), "--gpu", "h100", "-f", "json")
        assert rc == 0, err
        doc = json.loads(out)
        answers.append([(r["scheme"], r["block"], r["time_s"]) for r in doc["rows"]])
    assert answers[0] == answers[1] and {s for s, _, _ in answers[0]} == {"mdm", "block"}
