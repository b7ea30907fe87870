"""The Hugging Face Hub: a model's config.json (cached, offline-aware) and its checkpoint's size.

Everything goes through `huggingface_hub`, so the usual environment applies: HF_HOME / HF_HUB_CACHE
(where the cache lives), HF_TOKEN (private and gated repos), HF_ENDPOINT (a mirror), HF_HUB_OFFLINE
(no network at all), HF_HUB_ETAG_TIMEOUT (seconds to wait for the Hub's answer). The library is
imported inside the functions: it takes long to import and most commands never need it.

`fetch_config` sends one metadata request (HEAD) itself, without retries, before letting
`hf_hub_download` fetch the file. On its own, `hf_hub_download` retries a failed metadata request
for about half a minute (with a 60 s timeout) when nothing is cached, which is too slow for a CLI;
with the HEAD first, a Hub that is down or slow ends in one clear error within the timeout, or in
the cached copy.

Every failure leaves as one line naming what to do next, in a `dlmcost.errors` class with its own
exit code; nothing from the client library (or a traceback) gets through, and its own retry
messages and warnings stay off stderr unless `--verbose`.

All requests of one call share a time budget (30 s by default; `--hub-timeout` or
DLMCOST_HUB_TIMEOUT), and every answer passes `hubguard`'s checks (plain-hex ETags and commits,
bounded bodies, bounded `Retry-After` waits). `--verify` reads at most `MAX_SHARDS` shard headers.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .. import files
from ...errors import (
    ConfigError,
    DlmcostError,
    HubError,
    HubFileNotFound,
    HubGated,
    HubRepoNotFound,
    HubRevisionNotFound,
    HubUnreachable,
    UnknownModelError,
    UsageError,
)
from ...safe_text import shown

CONFIG_NAME = "config.json"
INDEX_NAME = "model.safetensors.index.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# a git ref name as the Hub takes it (main, v1.0, refs/pr/3): huggingface_hub writes the commit a
# revision resolves to at <cache>/refs/<revision>, so '..' or a leading '/' would put it outside the cache
_REVISION = re.compile(r"^(?!/)(?!.*//)(?!.*/$)(?!.*(?:^|/)\.)[A-Za-z0-9._/+=,@-]{1,256}$")


def check_revision(revision: str | None) -> None:
    """Refuse a revision that is no git ref name (before the cache or the Hub sees it)."""
    if revision is not None and not _REVISION.fullmatch(revision):
        raise UsageError(f"--revision '{shown(revision, 60)}' is not a branch, tag or commit name: letters, digits, "
                         "'.', '_', '-', '+', '=', ',', '@' and '/' between names, no name starting with '.'")

BUDGET_ENV = "DLMCOST_HUB_TIMEOUT"
DEFAULT_BUDGET_S = 30.0  # all requests of one command together
MAX_SHARDS = 1000  # safetensors files `--verify` reads headers of (the largest real checkpoints have a few hundred)
MAX_DIM = 1 << 40  # one tensor dimension
MAX_PARAMS = 10**15  # one checkpoint

_settings: dict[str, Any] = {"verbose": False, "budget_s": None}


def configure(*, verbose: bool = False, budget_s: float | None = None) -> None:
    """The CLI's --verbose and --hub-timeout, for this command (None: DLMCOST_HUB_TIMEOUT or 30 s)."""
    _settings["verbose"] = bool(verbose)
    _settings["budget_s"] = None if budget_s is None else _check_budget(budget_s, "--hub-timeout")


def _check_budget(value: Any, where: str) -> float:
    try:
        budget = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{where} must be a number of seconds, got '{shown(value, 40)}'") from None
    if not (math.isfinite(budget) and 0 < budget <= 86400):
        raise UsageError(f"{where} must be a number of seconds in (0, 86400], got {shown(value, 40)}")
    return budget


def hub_budget() -> float:
    """Seconds all Hub requests of one call may take together."""
    if _settings["budget_s"] is not None:
        return _settings["budget_s"]
    env = os.environ.get(BUDGET_ENV)
    return _check_budget(env, BUDGET_ENV) if env else DEFAULT_BUDGET_S


# --- helpers ------------------------------------------------------------------------------------


def _one_line(text: Any, limit: int = 200) -> str:
    """The first non-empty line of a message, whitespace collapsed, cut to `limit` characters."""
    for line in str(text).splitlines():
        line = " ".join(line.split())
        if line:
            return shown(line, limit)
    return ""


def _check_token_file() -> None:
    """The client reads HF_TOKEN_PATH whole: make sure it is a small regular file first."""
    from huggingface_hub import constants

    if os.environ.get("HF_TOKEN"):
        return
    path = getattr(constants, "HF_TOKEN_PATH", None)
    if path and os.path.lexists(path):
        files.read_bytes(path, limit=files.TOKEN_LIMIT, error=HubError, what="the Hugging Face token file (HF_TOKEN_PATH)")


def _load_hub() -> None:
    """Import huggingface_hub, turning a missing package or a bad HF_* variable into one line."""
    try:
        import huggingface_hub  # noqa: F401
        from huggingface_hub import constants, utils  # noqa: F401
    except ImportError as exc:
        raise HubError(f"the Hub needs the huggingface_hub package ({_one_line(exc)}): "
                       f"pip install huggingface_hub") from None
    except Exception as exc:  # noqa: BLE001 - it parses HF_* variables at import time
        raise HubError(
            f"huggingface_hub failed to load ({type(exc).__name__}: {_one_line(exc)}): check the HF_* "
            f"environment variables (HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT take whole seconds)"
        ) from None
    _check_token_file()
    hub_budget()  # a bad DLMCOST_HUB_TIMEOUT is a usage error before any request


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _offline() -> bool:
    from huggingface_hub import constants

    is_offline = getattr(constants, "is_offline_mode", None)
    return bool(is_offline() if callable(is_offline) else constants.HF_HUB_OFFLINE)


def _etag_timeout(timeout_s: float | None) -> float:
    from huggingface_hub import constants

    return float(timeout_s) if timeout_s is not None else float(constants.HF_HUB_ETAG_TIMEOUT)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Network-level failures of whichever HTTP client this huggingface_hub uses."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError"), ("requests", "Timeout")):
        try:
            mod = __import__(module)
        except ImportError:
            continue
        cls = getattr(mod, name, None) or getattr(getattr(mod, "exceptions", None), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _is_timeout(exc: BaseException) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _commit_from_path(path: str | os.PathLike) -> str | None:
    """`.../snapshots/<commit>/config.json` -> the commit, when the path is in the HF cache layout."""
    name = Path(path).parent.name
    return name if _COMMIT.fullmatch(name) else None


@contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars, no retry chatter and no library warnings on stderr (dlmcost reports
    failures itself) unless --verbose; and every request inside under hubguard's checks."""
    import huggingface_hub.file_download  # noqa: F401 - its import sets the library's log level: first
    import logging  # (here: the CLI imports this module on every command, and logging costs 1 ms)

    from huggingface_hub import utils as hf_utils

    from .hubguard import guarded

    verbose = _settings["verbose"]
    bars_were_off = hf_utils.are_progress_bars_disabled()
    hf_logger = logging.getLogger("huggingface_hub")
    level = hf_logger.level
    if not bars_were_off and not verbose:
        hf_utils.disable_progress_bars()
    if not verbose:
        hf_logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), guarded(hub_budget(), _endpoint()):
            if not verbose:
                warnings.simplefilter("ignore")
            yield
    finally:
        if not bars_were_off and not verbose:
            hf_utils.enable_progress_bars()
        hf_logger.setLevel(level)


# --- errors -------------------------------------------------------------------------------------


def _translate(exc: BaseException, repo_id: str, revision: str, what: str,
               timeout_s: float | None = None) -> DlmcostError:
    """One `huggingface_hub`/network exception -> one dlmcost error with one line of advice."""
    if isinstance(exc, DlmcostError):
        return exc
    from huggingface_hub import utils as hf_utils

    def cls(name: str) -> type[BaseException]:
        found = getattr(hf_utils, name, None)
        if found is None:
            try:
                from huggingface_hub import errors as hf_errors

                found = getattr(hf_errors, name, None)
            except ImportError:  # older huggingface_hub
                found = None
        return found if isinstance(found, type) else type(f"_Missing{name}", (Exception,), {})

    endpoint = _endpoint()
    page = f"{endpoint}/{repo_id}"
    at_rev = f" at revision '{revision}'" if revision != "main" else ""
    status = _status(exc)
    detail = _one_line(exc).rstrip(".") or type(exc).__name__

    if isinstance(exc, cls("HFValidationError")):
        return UnknownModelError(
            f"'{repo_id}' is not a local file, a bundled model, or a valid Hub repo id: a Hub id is "
            f"namespace/name, of letters, digits, '-', '_' and '.'")
    if isinstance(exc, cls("GatedRepoError")):
        return HubGated(
            f"{repo_id} is gated: accept the model's terms on its Hub page ({page}) and set HF_TOKEN "
            f"to a token of an account that has access")
    if isinstance(exc, cls("RepositoryNotFoundError")):
        return HubRepoNotFound(
            f"no model '{repo_id}' on the Hub ({endpoint}): check the id (namespace/name); "
            f"for a private repo set HF_TOKEN to a token that can read it")
    if isinstance(exc, cls("RevisionNotFoundError")):
        return HubRevisionNotFound(
            f"{repo_id} has no revision '{revision}': use an existing branch, tag or commit hash "
            f"(see {page}/tree/main), or leave out --revision for main")
    if isinstance(exc, cls("OfflineModeIsEnabled")) or (
            isinstance(exc, cls("LocalEntryNotFoundError")) and _offline()):
        return HubUnreachable(
            f"HF_HUB_OFFLINE is set and {what} of {repo_id}{at_rev} is not in the Hugging Face cache "
            f"({_cache_dir()}): unset HF_HUB_OFFLINE to download it, or pass a local config file")
    if isinstance(exc, cls("LocalEntryNotFoundError")):  # network failed, nothing cached
        return HubUnreachable(
            f"cannot reach the Hub ({endpoint}) for {repo_id} and it is not cached: check the network "
            f"and retry, or set HF_HUB_OFFLINE=1 to use models already in the cache")
    if isinstance(exc, (cls("RemoteEntryNotFoundError"), cls("EntryNotFoundError"))):
        return HubFileNotFound(
            f"{repo_id}{at_rev} has no {what}: it may not be a transformers model; "
            f"pass a local config file instead")
    if isinstance(exc, cls("NotASafetensorsRepoError")):
        return HubFileNotFound(
            f"{repo_id}{at_rev} has no model.safetensors or model.safetensors.index.json: "
            f"the checkpoint's parameter count can only be read from safetensors weights")
    if isinstance(exc, cls("SafetensorsParsingError")):
        return HubError(f"cannot read the safetensors header of {repo_id}{at_rev}: {detail}")
    if status in (401, 403):
        return HubGated(
            f"the Hub refused access to {repo_id} (HTTP {status}): set HF_TOKEN to a token with read "
            f"access, and accept the model's terms on its Hub page ({page}) if it is gated")
    if status == 429:
        return HubUnreachable(
            f"the Hub ({endpoint}) is rate-limiting requests for {repo_id} (HTTP 429): retry in a "
            f"minute, set HF_TOKEN for a higher limit, or HF_HUB_OFFLINE=1 to use the cache")
    if status is not None and status >= 500:
        return HubUnreachable(
            f"the Hub ({endpoint}) failed with HTTP {status} for {repo_id} and nothing is cached: "
            f"retry later, or set HF_HUB_OFFLINE=1 to use models already in the cache")
    if status is not None:
        return HubUnreachable(
            f"the Hub ({endpoint}) answered HTTP {status} for {what} of {repo_id}: {detail}; "
            f"check HF_ENDPOINT and retry")
    if isinstance(exc, cls("FileMetadataError")):
        return HubUnreachable(
            f"{endpoint} does not answer like the Hugging Face Hub for {what} of {repo_id}: {detail} "
            f"(a Hub answer has ETag, X-Repo-Commit and a size); check HF_ENDPOINT and proxy settings")
    if _is_timeout(exc):
        waited = f" after {timeout_s:g} s" if timeout_s is not None else ""
        return HubUnreachable(
            f"the Hub ({endpoint}) did not answer{waited} for {repo_id} and nothing is cached: retry, "
            f"raise HF_HUB_ETAG_TIMEOUT, or set HF_HUB_OFFLINE=1 to use models already in the cache")
    if isinstance(exc, _transport_errors()):
        return HubUnreachable(
            f"cannot reach the Hub ({endpoint}) for {repo_id}: {detail}; check the network, proxy and "
            f"HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use models already in the cache")
    if "Consistency check failed" in str(exc):  # body size differs from the announced size
        return HubUnreachable(
            f"the Hub ({endpoint}) sent {what} of {repo_id} with a size other than the one it announced: "
            f"retry; if it persists, check HF_ENDPOINT and any proxy in between")
    if isinstance(exc, (TypeError, KeyError, AttributeError, RecursionError, json.JSONDecodeError)):
        # the client's reading of an answer no Hub sends (model info that is a list, a string where
        # a list belongs, nesting without end): no retry mends it
        return HubUnreachable(
            f"{endpoint} does not answer like the Hugging Face Hub for {what} of {repo_id}: the client could "
            f"not read its answer ({type(exc).__name__}: {detail}); check HF_ENDPOINT and proxy settings")
    if isinstance(exc, OSError):  # the local side: an unwritable HF_HOME, a full disk...
        return HubError(
            f"cannot use the Hugging Face cache ({_cache_dir()}) for {repo_id}: {type(exc).__name__}: "
            f"{detail}; set HF_HOME to a writable folder with free space")
    # Anything else from the client (an unexpected answer...):
    return HubUnreachable(
        f"could not get {what} of {repo_id} from the Hub ({endpoint}): "
        f"{type(exc).__name__}: {detail}; retry, or set HF_HUB_OFFLINE=1 to use the cache")


# --- config.json --------------------------------------------------------------------------------


def _cached_config(repo_id: str, revision: str) -> tuple[str | None, bool]:
    """(path of the cached config.json or None, whether the cache records that it does not exist)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, CONFIG_NAME, revision=revision)
    if isinstance(found, str) and os.path.isfile(found):
        return found, False
    return None, found is not None  # huggingface_hub's _CACHED_NO_EXIST sentinel


def is_cached(repo_id: str, revision: str | None = None) -> bool:
    """Whether the Hugging Face cache holds this repository's config.json (no network)."""
    _load_hub()
    try:
        with _quiet():
            return _cached_config(repo_id, revision or "main")[0] is not None
    except Exception:  # noqa: BLE001 - an unreadable cache holds nothing we can use
        return False


def _locate_config(repo_id: str, revision: str, timeout_s: float | None) -> tuple[str, str]:
    """(local path of config.json, "cache" | "hub"); raises client exceptions untranslated."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub import utils as hf_utils

    cached, known_missing = _cached_config(repo_id, revision)
    if _offline() or (cached and _COMMIT.fullmatch(revision)):
        # Offline, or a commit hash (immutable) already in the cache: no network round trip.
        if cached:
            return cached, "cache"
        if known_missing:
            raise HubFileNotFound(
                f"{repo_id} has no {CONFIG_NAME} at revision '{revision}' (recorded in the Hugging Face "
                f"cache): pass a local config file instead")
        raise hf_utils.OfflineModeIsEnabled(f"{repo_id} is not cached")

    # One HEAD, no retries: a Hub that is down or slow falls back to the cache at once. Its answer
    # (ETag, commit: hubguard refuses anything but plain hex) and size are checked before any download.
    from .hubguard import HostileAnswer

    timeout = _etag_timeout(timeout_s)
    url = hf_hub_url(repo_id, CONFIG_NAME, revision=revision)
    try:
        meta = get_hf_file_metadata(url, timeout=timeout)
    except Exception as exc:
        definite = (hf_utils.RevisionNotFoundError, hf_utils.EntryNotFoundError, hf_utils.HFValidationError,
                    HostileAnswer)
        if cached and not isinstance(exc, definite):
            # Down, slow, unreachable, or refusing us (an expired token, say): like hf_hub_download,
            # use the copy we already have for this revision.
            return cached, "cache"
        raise
    missing = [name for name, value in (("ETag", meta.etag), ("X-Repo-Commit", meta.commit_hash)) if not value]
    if missing:
        raise HubUnreachable(
            f"{_endpoint()} does not answer like the Hugging Face Hub for {CONFIG_NAME} of {shown(repo_id)}: its "
            f"answer has no {' or '.join(missing)} header; check HF_ENDPOINT and proxy settings")
    if meta.size is not None and meta.size > files.CONFIG_LIMIT:
        raise ConfigError(f"{CONFIG_NAME} of {shown(repo_id)} is {meta.size:,} bytes; a model config is at most "
                          f"{files.CONFIG_LIMIT >> 20} MiB")
    path = hf_hub_download(repo_id, CONFIG_NAME, revision=revision, etag_timeout=timeout)
    _check_inside_cache(path)
    return path, "hub"


def _check_inside_cache(path: str) -> None:
    """Belt and braces: the file the client returns lies inside the Hugging Face cache."""
    cache = os.path.realpath(_cache_dir())
    if os.path.commonpath([cache, os.path.realpath(os.path.dirname(path))]) != cache:
        raise HubError(f"the Hub client placed a file outside the Hugging Face cache ({shown(path)}); refusing it")


def _parse_json(path: str, repo_id: str) -> Any:
    what = f"{CONFIG_NAME} of {shown(repo_id)}"
    data = files.read_bytes(path, limit=files.CONFIG_LIMIT, error=ConfigError, what=what)
    return files.parse(files.decode(data, error=ConfigError, what=what), fmt="json", error=ConfigError, what=what)


def fetch_config(repo_id: str, revision: str | None = None,
                 timeout_s: float | None = None) -> tuple[Any, str, str | None]:
    """A Hub model's config.json: (parsed JSON, "cache" | "hub", commit hash or None).

    "hub" means the Hub was asked (the file may still come from the cache if it is current);
    "cache" means no answer from the Hub was used: HF_HUB_OFFLINE, a cached commit hash, or a Hub
    that could not be reached (or refused us) while a copy of this revision was cached.
    `timeout_s` bounds the wait for the Hub's first answer (default: HF_HUB_ETAG_TIMEOUT, 10 s).
    """
    check_revision(revision)
    rev = revision or "main"
    _load_hub()
    try:
        with _quiet():
            path, source = _locate_config(repo_id, rev, timeout_s)
    except Exception as exc:  # noqa: BLE001 - everything leaves as one dlmcost error
        raise _translate(exc, repo_id, rev, CONFIG_NAME, _etag_timeout_safe(timeout_s)) from None
    return _parse_json(path, repo_id), source, _commit_from_path(path)


def _etag_timeout_safe(timeout_s: float | None) -> float | None:
    try:
        return _etag_timeout(timeout_s)
    except Exception:  # noqa: BLE001
        return timeout_s


# --- checkpoint parameter count -----------------------------------------------------------------


def _check_shard_count(repo_id: str, revision: str | None, timeout: float) -> None:
    """Read the shard index first (bounded), so that an index naming 20,000 files is refused before
    20,000 header requests."""
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(repo_id, INDEX_NAME, revision=revision, etag_timeout=timeout)
    _check_inside_cache(path)
    what = f"{INDEX_NAME} of {shown(repo_id)}"
    index = files.read_document(path, limit=files.INDEX_LIMIT, error=HubFileNotFound, what=what, fmt="json")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise HubFileNotFound(f"{what} has no weight_map of tensor names to files")
    shards = {str(v) for v in weight_map.values()}
    if len(shards) > MAX_SHARDS:
        raise HubFileNotFound(f"{what} names {len(shards):,} shard files; --verify reads at most {MAX_SHARDS:,}")


def _count_params(meta: Any, repo_id: str) -> dict[str, int]:
    """Parameters per dtype from the headers, every shape checked: whole, non-negative, bounded."""
    by_dtype: dict[str, int] = {}
    total = 0
    for fname, fmeta in (getattr(meta, "files_metadata", None) or {}).items():
        for name, tensor in (getattr(fmeta, "tensors", None) or {}).items():
            shape = getattr(tensor, "shape", None)
            if not isinstance(shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM for d in shape):
                raise HubError(f"the safetensors header of {shown(fname)} in {shown(repo_id)} gives tensor "
                               f"{shown(name, 80)} the shape {shown(shape, 80)}: dimensions must be whole "
                               f"numbers in [0, {MAX_DIM:,}]")
            count = math.prod(shape)
            total += count
            if total > MAX_PARAMS:
                raise HubError(f"the safetensors headers of {shown(repo_id)} add up to more than "
                               f"{MAX_PARAMS:.0e} parameters: not a real checkpoint")
            key = str(getattr(tensor, "dtype", "?"))
            by_dtype[key] = by_dtype.get(key, 0) + count
    return by_dtype


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PARAMS


def verify_params(repo_id: str, revision: str | None = None, *, timeout_s: float | None = None) -> dict:
    """The checkpoint's parameter count, read from its safetensors headers (no weights downloaded).

    Returns {"checkpoint_params": int, "params_by_dtype": {dtype: int}, "files": int,
    "sharded": bool, "commit": str | None, "hub_reported_params": int | None}; the last is the
    Hub's own safetensors count, when its model API gives one.
    """
    check_revision(revision)
    rev = revision or "main"
    _load_hub()
    try:
        with _quiet():
            if _offline():
                raise HubUnreachable(
                    f"HF_HUB_OFFLINE is set: reading the safetensors headers of {repo_id} needs the Hub; "
                    f"unset HF_HUB_OFFLINE to verify the parameter count")
            from huggingface_hub import HfApi

            api = HfApi()
            timeout = _etag_timeout(timeout_s)
            # model_info first: it tells a missing repo, revision or access apart (get_safetensors_metadata
            # reports all of those as "not a safetensors repo"), and pins the commit for what follows.
            info = api.model_info(repo_id, revision=revision, timeout=timeout)
            commit = getattr(info, "sha", None)
            pinned = commit if isinstance(commit, str) and _COMMIT.fullmatch(commit) else revision
            siblings = {getattr(s, "rfilename", None) for s in (getattr(info, "siblings", None) or [])}
            if INDEX_NAME in siblings and "model.safetensors" not in siblings:
                _check_shard_count(repo_id, pinned, timeout)
            meta = api.get_safetensors_metadata(repo_id, revision=pinned)
    except Exception as exc:  # noqa: BLE001
        raise _translate(exc, repo_id, rev, "safetensors weights", _etag_timeout_safe(timeout_s)) from None

    by_dtype = _count_params(meta, repo_id)
    if sum(by_dtype.values()) <= 0:
        raise HubFileNotFound(f"the safetensors headers of {repo_id}{'' if rev == 'main' else f' at revision {rev!r}'} "
                              f"list no tensors: there is no parameter count to compare with")
    reported = getattr(getattr(info, "safetensors", None), "total", None)
    return {
        "checkpoint_params": sum(by_dtype.values()),
        "params_by_dtype": by_dtype,
        "files": len(meta.files_metadata),
        "sharded": bool(meta.sharded),
        "commit": commit if isinstance(commit, str) else None,
        # the Hub's total, where it is a count (`true` or -5 from a server unlike the Hub is none)
        "hub_reported_params": reported if _is_count(reported) else None,
    }
