"""Finding a model by the name people type: bundled ids match whatever their case, with or
without the organisation; a near miss gets "did you mean" before any network request; an
ambiguous name lists its candidates; a Hub id near no bundled one still goes to the Hub."""

from __future__ import annotations

import pytest

from dlmcost.cli import main
from dlmcost.errors import HubRepoNotFound, UnknownModelError
from dlmcost.inputs.models import hub, resolve_model
from dlmcost.inputs.names import is_slip


@pytest.fixture
def hub_calls(monkeypatch, tmp_path):
    """Every Hub request, recorded and refused (exit 11), with an empty Hugging Face cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    calls = []

    def fetch(repo_id, revision=None, timeout_s=None):
        calls.append(repo_id)
        raise HubRepoNotFound(f"{repo_id}: not asked of a real Hub in the tests")

    monkeypatch.setattr(hub, "fetch_config", fetch)
    return calls


@pytest.mark.parametrize("typed, bundled", [
    ("llada2.0-mini", "inclusionAI/LLaDA2.0-mini"),  # no organisation, any case
    ("LLaDA-8B-Instruct", "GSAI-ML/LLaDA-8B-Instruct"),
    ("gsai-ml/llada-8b-instruct", "GSAI-ML/LLaDA-8B-Instruct"),
    ("DEEPSEEK-V3", "deepseek-ai/DeepSeek-V3"),
])
def test_bundled_ids_match_without_case_or_organisation(hub_calls, typed, bundled):
    assert resolve_model(typed).id == bundled
    assert hub_calls == []


def test_a_near_miss_gets_did_you_mean_before_any_network_request(hub_calls, capsys):
    rc = main(["model", "inclusionAI/LLaDA2.0-min"])
    err = capsys.readouterr().err
    assert rc == 6 and "did you mean inclusionAI/LLaDA2.0-mini?" in err and "--hub" in err
    assert hub_calls == []
    rc = main(["model", "LLaDA-8B-Instrcut"])  # a bare name: never a Hub id
    assert rc == 6 and "did you mean GSAI-ML/LLaDA-8B-Instruct?" in capsys.readouterr().err
    assert hub_calls == []


def test_an_ambiguous_name_lists_the_candidates(hub_calls):
    with pytest.raises(UnknownModelError) as e:
        resolve_model("llada2.0")
    assert "inclusionAI/LLaDA2.0-mini" in e.value.message and "inclusionAI/LLaDA2.0-flash" in e.value.message
    with pytest.raises(UnknownModelError) as e:
        resolve_model("Qwen3")
    assert "Qwen/Qwen3-8B" in e.value.message and "Qwen/Qwen3-30B-A3B" in e.value.message
    assert hub_calls == []


@pytest.mark.parametrize("hub_id", [
    "Qwen/Qwen3-4B",  # a digit apart from Qwen/Qwen3-8B: another size, not a slip
    "google/gemma-3-1b-pt",  # a short word apart from gemma-3-1b-it: another variant
    "inclusionAI/LLaDA2.0-mini-preview",  # more than a slip longer
    "someone/some-model",
])
def test_hub_ids_near_no_bundled_one_still_go_to_the_hub(hub_calls, hub_id):
    with pytest.raises(HubRepoNotFound):
        resolve_model(hub_id)
    assert hub_calls == [hub_id]


def test_hub_flag_fetches_a_near_miss_as_written(hub_calls):
    with pytest.raises(HubRepoNotFound):
        resolve_model("inclusionAI/LLaDA2.0-min", hub=True)
    assert hub_calls == ["inclusionAI/LLaDA2.0-min"]
    with pytest.raises(HubRepoNotFound):  # and a bare bundled name under --hub: its full id
        resolve_model("llada2.0-mini", hub=True)
    assert hub_calls[-1] == "inclusionAI/LLaDA2.0-mini"


@pytest.mark.parametrize("typed, meant, slip", [
    ("inclusionAI/LLaDA2.0-min", "inclusionAI/LLaDA2.0-mini", True),  # a letter left out
    ("GSAI-ML/LLaDA-8B-Instrcut", "GSAI-ML/LLaDA-8B-Instruct", True),  # two swapped
    ("GSAIML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-8B-Instruct", True),  # a separator left out
    ("Qwen/Qwen3-4B", "Qwen/Qwen3-8B", False),
    ("Qwen/Qwen2-8B", "Qwen/Qwen3-8B", False),  # a digit inside a long word: another version
    ("deepseek-ai/DeepSeek-V2", "deepseek-ai/DeepSeek-V3", False),
    ("google/gemma-3-1b-pt", "google/gemma-3-1b-it", False),
    ("GSAI-ML/LLaDA-8B-Intsrcut", "GSAI-ML/LLaDA-8B-Instruct", False),  # four letters moved
    ("GSAI-ML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-8B-Instruct", False),  # the same name
])
def test_what_counts_as_a_slip(typed, meant, slip):
    assert is_slip(typed, meant) is slip


def test_gpu_names_and_model_names_share_the_suggestions(capsys):
    rc = main(["analyze", "--gpu", "h10"])
    assert rc == 4 and "did you mean" in capsys.readouterr().err
