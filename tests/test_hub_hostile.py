"""A Hub that misbehaves, driven through the real huggingface_hub client (tests/hub_server.py).

Each case is one class of hostile or broken answer. All run in one process (with a 2 s total Hub
time budget, so that the slow ones end fast; the one that waits out the budget in a second process
beside it) against a fresh cache in a deep HF_HOME; afterwards
nothing may exist outside HF_HOME.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import LLADA_CONFIG, FakeHub, FakeRepo, Misbehaviour, raw_safetensors  # noqa: E402
import forkrun  # noqa: E402
from test_hub import assert_error, hub_env, run_call_groups  # noqa: E402

from dlmcost.inputs.models.hub import MAX_SHARDS  # noqa: E402

BUDGET_S = 2  # the dripping answers wait it out: short, to keep the suite fast
# the answers that fail fast get a budget they never reach, so that a loaded machine (a gzip
# bomb's 64 MiB inflated under 4 busy processes took 2 s) does not turn their error into a spent budget
FAST_FAIL_BUDGET_S = 8
CONFIG = LLADA_CONFIG.read_bytes()
PATH_ETAG = '"../../../../escaped"'


def _index(shards: int) -> bytes:
    weight_map = {f"t{i}": f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(shards)}
    return json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}).encode()


def _shape_file(shape: str) -> dict:
    header = '{"__metadata__": {"format": "pt"}, "w": {"dtype": "BF16", "shape": %s, "data_offsets": [0, 2]}}' % shape
    return {"config.json": CONFIG, "model.safetensors": raw_safetensors(header)}


def hostile_repos() -> dict[str, FakeRepo]:
    def repo(bad: Misbehaviour, files: dict | None = None) -> FakeRepo:
        return FakeRepo(files or {"config.json": CONFIG}, misbehave=bad)

    return {
        "evil/etag": repo(Misbehaviour(etag=PATH_ETAG)),
        "evil/commit": repo(Misbehaviour(commit="../../../../escaped")),
        "evil/etag-later": repo(Misbehaviour(etag=PATH_ETAG, after_heads=1)),
        "evil/no-etag": repo(Misbehaviour(no_etag=True)),
        "evil/rate-limited": repo(Misbehaviour(retry_after=3600)),
        "evil/ratelimit-header": repo(Misbehaviour(ratelimit='"api";r=0;t=3600')),
        # each byte within the read timeout, but the answer outlasts the budget
        "evil/drip": repo(Misbehaviour(drip_s=1.5)),
        # headers without end, HEAD too: each read gets its byte, so no read timeout ever fires
        "evil/header-drip": repo(Misbehaviour(drip_headers_s=0.5)),
        "evil/slow-drip": repo(Misbehaviour(drip_s=3)),  # slower than the read timeout: the client retries
        "evil/gzip-bomb": repo(Misbehaviour(gzip_size=64 << 20, announce_size=4000)),
        "evil/huge": repo(Misbehaviour(announce_size=1 << 30)),
        "evil/long-body": repo(Misbehaviour(extra_bytes=5000)),
        "evil/shards": FakeRepo({"config.json": CONFIG, "model.safetensors.index.json": _index(20_000)}),
        "evil/shape-inf": FakeRepo(_shape_file("[1e400]")),
        "evil/shape-neg": FakeRepo(_shape_file("[-5, 4]")),
        "evil/shape-float": FakeRepo(_shape_file("[2.5]")),
        # model info no Hub sends: the client's own parsing fails (TypeError, RecursionError)
        "evil/info-list": FakeRepo({"config.json": CONFIG}, info_body=b"[1, 2]"),
        "evil/info-siblings": FakeRepo({"config.json": CONFIG}, info_body=b'{"id": "x", "siblings": "zzz"}'),
        "evil/info-nested": FakeRepo({"config.json": CONFIG}, info_body=b"[" * 100_000 + b"]" * 100_000),
        # a parameter total that is no count (`true` was reported as 1 parameter, -5 as -5)
        "evil/total-bool": FakeRepo(_shape_file("[2, 2]"), params=True),
        "evil/total-negative": FakeRepo(_shape_file("[2, 2]"), params=-5),
    }


VERIFIED = ("evil/shards", "evil/shape-inf", "evil/shape-neg", "evil/shape-float", "evil/info-list",
            "evil/info-siblings", "evil/info-nested", "evil/total-bool", "evil/total-negative")
CASES = {name: {"repo": name} for name in hostile_repos() if name not in VERIFIED and name != "evil/slow-drip"}
CASES |= {name: {"fn": "verify", "repo": name} for name in VERIFIED}
SPENDS_THE_BUDGET = ("evil/drip", "evil/header-drip")


@pytest.fixture(scope="module")
def hub():
    with FakeHub(hostile_repos()) as server:
        yield server


@pytest.fixture(scope="module")
def runs(hub, tmp_path_factory):
    """Every process of the module against its Hub, at once, so that the budgets they wait out
    overlap: the API calls (`results`) and the CLI runs (`cli_runs`)."""
    root = tmp_path_factory.mktemp("hostile")
    home = root / "a" / "b" / "c" / "d" / "hf_home"
    env = hub_env(hub.url, home, DLMCOST_HUB_TIMEOUT=str(BUDGET_S))
    # each dripping answer takes the whole budget, waiting: its own process, beside the others
    # (distinct repos, so they share no cache entry)
    groups = [(env, {name: CASES[name]}) for name in SPENDS_THE_BUDGET]
    fast_env = hub_env(hub.url, home, DLMCOST_HUB_TIMEOUT=str(FAST_FAIL_BUDGET_S))
    groups.append((fast_env, {name: c for name, c in CASES.items() if name not in SPENDS_THE_BUDGET}))
    cli = cli_cases(hub, tmp_path_factory.mktemp("cli_homes"))
    done = run_call_groups(groups, beside=cli)
    found = {name: res for results, _ in done for name, res in results.items()}
    stderr = "".join(err for _, err in done)
    return {"results": {"root": root, "home": home, "stderr": stderr, "requests": hub.requests, **found},
            "cli": cli}


@pytest.fixture(scope="module")
def results(runs):
    return runs["results"]


def test_nothing_written_outside_hf_home(results):
    """The hostile ETag and commit would put a blob (and a lock) next to HF_HOME's parents."""
    outside = [p for p in results["root"].rglob("*") if results["home"] not in (p, *p.parents)
               and not p.is_dir()]
    assert outside == []
    assert not any("escaped" in p.name for p in results["root"].rglob("*"))


def test_client_says_nothing_on_stderr(results):
    assert results["stderr"] == ""


@pytest.mark.parametrize("name, what", [("evil/etag", "ETag"), ("evil/commit", "commit"),
                                        ("evil/etag-later", "ETag")])
def test_path_in_etag_or_commit_is_refused(results, name, what):
    assert_error(results[name], "HostileAnswer", 15, what, "refusing")
    assert ".." in results[name]["message"]


def test_head_without_etag_says_so(results):
    res = results["evil/no-etag"]
    assert_error(res, "HubUnreachable", 15, "does not answer like the Hugging Face Hub", "ETag")
    assert "network" not in res["message"] and "HF_HOME" not in res["message"]


@pytest.mark.parametrize("name", ["evil/rate-limited", "evil/ratelimit-header"])
def test_long_retry_after_is_not_slept(results, name):
    res = results[name]
    assert_error(res, "HubUnreachable", 15, "3600", "rate-limiting")  # not the budget spent sleeping
    assert res["elapsed"] < FAST_FAIL_BUDGET_S


@pytest.mark.parametrize("name", SPENDS_THE_BUDGET)
def test_dripping_answer_ends_with_the_budget(results, name):
    """Every read gets its byte in time, so only a deadline for the whole request ends it: at the
    budget, where headers without end would never end (the body's chunks were checked against the
    budget before; the headers' reads were not)."""
    res = results[name]
    assert_error(res, "BudgetSpent", 15, f"{BUDGET_S} s", "--hub-timeout")
    assert res["elapsed"] < BUDGET_S + 1.5  # slack for a loaded machine


def test_gzip_bomb_is_cut_off(results):
    assert_error(results["evil/gzip-bomb"], "HostileAnswer", 15, "MiB", "decompression")


def test_announced_huge_config_is_not_downloaded(results):
    assert_error(results["evil/huge"], "ConfigError", 7, "1,073,741,824 bytes")
    assert ("GET", "/evil/huge/resolve/main/config.json") not in results["requests"]


def test_body_longer_than_announced(results):
    res = results["evil/long-body"]
    assert_error(res, "HubUnreachable", 15, "size other than the one it announced")
    assert "HF_HOME" not in res["message"]


def test_huge_shard_index_is_refused_before_fetching_headers(results):
    assert_error(results["evil/shards"], "HubFileNotFound", 14, "20,000 shard files", f"{MAX_SHARDS:,}")
    shard_requests = [p for _, p in results["requests"] if p.startswith("/evil/shards/") and "-of-" in p]
    assert shard_requests == []


@pytest.mark.parametrize("name, shape", [("evil/shape-inf", "inf"), ("evil/shape-neg", "-5"),
                                         ("evil/shape-float", "2.5")])
def test_bad_tensor_shapes_are_refused(results, name, shape):
    assert_error(results[name], "HubError", 10, "shape", shape)


@pytest.mark.parametrize("name", ["evil/info-list", "evil/info-siblings", "evil/info-nested"])
def test_model_info_no_hub_sends_is_said_so(results, name):
    """The client's parsing fails on it (TypeError, RecursionError); said as an answer unlike the Hub's,
    not "retry"."""
    res = results[name]
    assert_error(res, "HubUnreachable", 15, "does not answer like the Hugging Face Hub", "could not read")
    assert "retry" not in res["message"]


@pytest.mark.parametrize("name", ["evil/total-bool", "evil/total-negative"])
def test_a_reported_total_that_is_no_count_is_not_reported(results, name):
    res = results[name]
    assert res["ok"], res
    assert (res["checkpoint_params"], res["hub_reported_params"]) == (4, None)


# --- the CLI: one line on stderr, options and environment ---------------------------------------


def cli_cases(hub, home) -> dict[str, dict]:
    """The CLI runs against the hostile Hub, each a process of its own with its own HF_HOME (no
    shared lock), forked from one interpreter that imported dlmcost but not huggingface_hub
    (tests/forkrun.py)."""
    # reads time out after 1 s (the client's setting takes whole seconds), so the client has retried
    # (and said so) before the 3 s budget ends, even on a loaded machine (in a 2 s budget, 6 busy
    # processes on 2 cores left it no retry; in 3 s it retried in each of three runs)
    chatter = dict(DLMCOST_HUB_TIMEOUT="3", HF_HUB_DOWNLOAD_TIMEOUT="1")
    return {
        "quiet": forkrun.case(["model", "evil/slow-drip"], env=hub_env(hub.url, home / "home0", **chatter)),
        "verbose": forkrun.case(["model", "evil/slow-drip", "--verbose"], env=hub_env(hub.url, home / "home1", **chatter)),
        "token-device": forkrun.case(["model", "evil/etag"],
                                     env=hub_env(hub.url, home / "home2", HF_TOKEN_PATH="/dev/zero")),
    }


@pytest.fixture(scope="module")
def cli_runs(runs):
    """{name: [exit code, stdout, stderr] or None if it still ran after 60 s}."""
    return runs["cli"]


def test_cli_client_chatter_only_with_verbose(cli_runs):
    """The client retries a read that times out, saying so on stderr each time: dlmcost prints its
    one line instead, unless --verbose. (Both runs at once, to keep the suite fast.)"""
    assert cli_runs["quiet"] is not None and cli_runs["verbose"] is not None, "still running after 60 s"
    (code, out, err), (verbose_code, _, verbose_err) = cli_runs["quiet"], cli_runs["verbose"]
    assert [code, verbose_code] == [15, 15]
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and "time budget" in err, err
    assert "resume download" in verbose_err and verbose_err.count("\n") > 1, verbose_err


@pytest.mark.parametrize("args, env, needle", [
    # '' (an unset shell variable) was read as no revision: main, not the one meant
    (["--revision", ""], {}, "--revision is empty"),
    (["--revision", " "], {}, "--revision is empty"),
    (["--hub-timeout", "0"], {}, "--hub-timeout"),
    (["--hub-timeout", "nan"], {}, "--hub-timeout"),
    ([], {"DLMCOST_HUB_TIMEOUT": "soon"}, "DLMCOST_HUB_TIMEOUT"),
])
def test_cli_bad_hub_option_is_a_usage_error(monkeypatch, capsys, args, env, needle):
    """Refused while parsing, before the Hub client is imported or asked anything: in-process,
    offline (a request would fail differently)."""
    from dlmcost.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    rc = main(["model", "evil/etag", *args])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert out == "" and err.startswith("error: ") and needle in err and err.count("\n") == 1


def test_cli_token_file_that_is_a_device(cli_runs):
    assert cli_runs["token-device"] is not None, "still running after 60 s"
    code, _, err = cli_runs["token-device"]
    assert code == 10, err
    assert "HF_TOKEN_PATH" in err and "character device" in err


def test_a_revision_climbing_out_of_the_cache_is_refused_before_the_hub_is_asked(tmp_path):
    """huggingface_hub writes the commit a revision resolves to at <cache>/refs/<revision>: with
    --revision ../../../x and a Hub that answers for it, that file was written outside the cache
    (exit 0). A revision that is no git ref name is refused first, with one line."""
    import os
    import subprocess

    outside = tmp_path / "escaped"
    climb = "../" * 12 + str(outside).lstrip("/")
    repo = FakeRepo({"config.json": CONFIG})
    with FakeHub({"evil/refs": repo}) as hub:
        repo.branches = {"main": repo.commit, climb: repo.commit}  # the hostile Hub: "yes, that branch exists"
        env = hub_env(hub.url, tmp_path / "home" / "a" / "b")
        for revision in (climb, "..", "refs/../main", "/abs", "a b"):
            res = subprocess.run([sys.executable, "-m", "dlmcost", "model", "evil/refs", "--revision", revision],
                                 env=env, cwd=str(Path(__file__).resolve().parents[1]), capture_output=True,
                                 text=True, timeout=60)
            assert res.returncode == 2, (revision, res.returncode, res.stderr)
            assert res.stdout == "" and len(res.stderr.splitlines()) == 1, res.stderr
            assert res.stderr.startswith("error: --revision") and "Traceback" not in res.stderr
        assert not any("/resolve/" in path for _, path in hub.requests)  # refused before the Hub is asked
    assert not outside.exists() and sorted(os.listdir(tmp_path)) in (["home"], [])
