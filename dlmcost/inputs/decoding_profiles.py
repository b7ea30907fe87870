"""Published decodings: tokens per forward (TPF) and accuracy per checkpoint x decoding setting x
task, from the papers, reports and benchmark pages that printed them.

One YAML file per bundled model architecture (the repository's top-level `decoding/`, shipped in
the wheel as `dlmcost/_decoding`), named like the bundled configs (`org__name.yaml`). A file holds
the settings of the architecture's own checkpoint and of the checkpoints that share its config
(LLaDA2.1-mini beside LLaDA2.0-mini, the d3LLM and dParallel distillations beside LLaDA-8B), the
sources they come from, and the default a command uses when given no setting or task. The format,
each source's way of counting a forward and how to add a model are in docs/decoding.md.

TPFs from different sources are not interchangeable: each source says how it counts
(`Source.tpf_counting`), and a setting's results all come from its one source.

Hostile files: the text is size-capped before parsing, parsed with the safe loader only, unknown
keys are refused and every field is range-checked; a bad file is one `error:` line with exit code 5,
like a bad hardware or stack file. A user's file (`ProfileDB.load(extra_paths)`) with the
architecture of a bundled one replaces it.
"""

from __future__ import annotations

import math
import os
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationError, field_validator, \
    model_validator
from pydantic.functional_validators import AfterValidator

from . import files
from .bundled import bundled_decoding_dir
from ..errors import DlmcostError
from ..safe_text import shown

MAX_PROFILE_FILE_BYTES = 1 << 20  # the largest bundled file is about 35 KB
MAX_TPF = 1024.0  # tokens committed by one forward pass: far above any published decoding
DEFAULT_MIX = "general"  # the task name of the broadest published benchmark mix


class DecodingProfileError(DlmcostError):
    """A decoding-profile YAML that is unreadable or fails validation."""

    exit_code = 5


# C0 and C1 controls, DEL, the Unicode line separators and bidirectional overrides (as safe_text)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _plain(text: str) -> str:
    if _CONTROL.search(text):
        raise ValueError("must not hold control characters (a line break, an escape...)")
    return text


def _text(max_length: int, min_length: int = 1):
    return Annotated[str, Strict(), StringConstraints(min_length=min_length, max_length=max_length),
                     AfterValidator(_plain)]


HubId = Annotated[str, Strict(), StringConstraints(
    max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")]
Key = Annotated[str, Strict(), StringConstraints(max_length=60, pattern=r"^[a-z0-9][a-z0-9.+-]*$")]
# a task: lowercase words joined by hyphens (gsm8k, humaneval-plus, general)
TaskName = Annotated[str, Strict(), StringConstraints(max_length=60, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
# a scheme's name in dlmcost's vocabulary (checked against the scheme registry where it is used:
# this module sits below the engine)
SchemeName = Annotated[str, Strict(), StringConstraints(max_length=40, pattern=r"^[a-z][a-z0-9-]*$")]
Url = Annotated[str, Strict(), StringConstraints(max_length=500, pattern=r"^https?://[^\s]+$")]
Fraction = Annotated[float, Strict(), Field(ge=0, le=1)]
Tpf = Annotated[float, Strict(), Field(gt=0, le=MAX_TPF)]
Count = Annotated[int, Strict(), Field(ge=1, le=10_000_000)]
Flag = Annotated[bool, Strict()]

_FROZEN = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Result(BaseModel):
    """One published measurement: a setting's accuracy and tokens per forward on one task."""

    model_config = _FROZEN

    task: TaskName  # the key it is filed under in the setting's `results`
    accuracy: Fraction | None = None  # a fraction of the benchmark's own metric; None: not published
    tpf: Tpf | None = None  # tokens per forward as the source counts them; None: not published
    location: _text(300)  # where in the source (a table, a figure, a file)
    verified: Flag  # read in the primary source (false: a secondary copy, said in the source's notes)
    note: _text(1000, 0) = ""  # how a number was derived, or what sets it apart

    @model_validator(mode="after")
    def _something(self) -> "Result":
        if self.accuracy is None and self.tpf is None:
            raise ValueError("a result needs an accuracy, a tpf or both")
        return self


class Source(BaseModel):
    """Where a setting's numbers were published, and how that source counts a forward."""

    model_config = _FROZEN

    key: Key  # the key it is filed under in the file's `sources`
    title: _text(300)
    ref: _text(300)  # arXiv id, repository and commit, file
    url: Url
    tpf_counting: _text(1500)  # what one "forward" is in this source's TPF
    notes: _text(2000, 0) = ""
    # task -> what it means in this source (benchmark variant, shots, prompt format)
    tasks: dict[TaskName, _text(500)] = Field(min_length=1, max_length=200)
    # a task that averages others (`general`: a report's benchmark mix) -> its member tasks
    mixes: dict[TaskName, list[TaskName]] = Field(default_factory=dict, max_length=20)

    @field_validator("mixes")
    @classmethod
    def _mixes(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for mix, members in v.items():
            if not 2 <= len(members) <= 200:
                raise ValueError(f"mix '{mix}' needs 2 to 200 member tasks, got {len(members)}")
            if len(set(members)) != len(members) or mix in members:
                raise ValueError(f"mix '{mix}' lists a task twice, or itself")
        return v

    @model_validator(mode="after")
    def _documented(self) -> "Source":
        for mix, members in self.mixes.items():
            undocumented = [t for t in (mix, *members) if t not in self.tasks]
            if undocumented:
                raise ValueError(f"mixes.{mix}: {', '.join(undocumented[:5])} not described in tasks")
        return self


class Setting(BaseModel):
    """One decoding of one checkpoint, as one source ran it, and its results per task."""

    model_config = _FROZEN

    key: Key  # unique within the file
    checkpoint: HubId
    name: _text(120)  # short and readable: "S mode", "threshold 0.95, block 32"
    scheme: SchemeName  # dlmcost's scheme that runs it (`dlmcost schemes`)
    block: Count | None = None  # None: not published (or the scheme has none)
    steps: Count | None = None  # denoising passes over the whole answer (dlmcost's `steps`)
    steps_per_block: Count | None = None  # when the source gives steps per block (or per canvas)
    threshold: Annotated[float, Strict(), Field(gt=0, le=10)] | None = None  # a confidence (0, 1] or entropy bound
    mode: _text(40) | None = None  # a named mode (LLaDA2.1's S and Q)
    cache: _text(300) | None = None
    gen_length: Count | None = None  # answer tokens the source generated (its canvas)
    source: Source
    notes: _text(2000, 0) = ""
    results: dict[TaskName, Result] = Field(min_length=1, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _task_names(cls, data: Any) -> Any:
        """Each result learns the task it is filed under."""
        if isinstance(data, dict) and isinstance(data.get("results"), dict):
            data = {**data, "results": {task: {**r, "task": task} if isinstance(r, dict) else r
                                        for task, r in data["results"].items()}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "Setting":
        undocumented = [t for t in self.results if t not in self.source.tasks]
        if undocumented:
            raise ValueError(f"results: {', '.join(undocumented[:5])} not described in source "
                             f"'{self.source.key}' (its tasks)")
        too_many = [t for t, r in self.results.items() if self.gen_length and r.tpf and r.tpf > self.gen_length]
        if too_many:
            raise ValueError(f"results.{too_many[0]}: tpf is more than the {self.gen_length} tokens generated")
        return self

    @property
    def label(self) -> str:
        """The checkpoint's name and the setting's: "LLaDA2.1-mini S mode"."""
        return f"{self.checkpoint.rsplit('/', 1)[-1]} {self.name}"

    def result(self, task: str) -> Result | None:
        return self.results.get(task)


class DefaultChoice(BaseModel):
    """What commands use when given no setting or task: the model's own published decoding."""

    model_config = _FROZEN

    checkpoint: HubId
    setting: Key
    task: TaskName


class ArchitectureProfiles(BaseModel):
    """The published decodings of one bundled architecture's checkpoints (one file)."""

    model_config = _FROZEN

    architecture: HubId  # the bundled model id whose config.json the checkpoints share
    default: DefaultChoice
    # checkpoint id -> how it relates to the architecture (the model itself, a fine-tune...)
    checkpoint_notes: dict[HubId, _text(500)] = Field(alias="checkpoints", min_length=1, max_length=100)
    sources: dict[Key, Source] = Field(min_length=1, max_length=50)
    settings: list[Setting] = Field(min_length=1, max_length=1000)

    @model_validator(mode="before")
    @classmethod
    def _resolve_sources(cls, data: Any) -> Any:
        """A setting names its source by key; it gets the source itself (and each source its key)."""
        if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
            return data
        sources = {k: {**v, "key": k} if isinstance(v, dict) else v for k, v in data["sources"].items()}
        settings = data.get("settings")
        if isinstance(settings, list):
            resolved = []
            for i, s in enumerate(settings):
                if isinstance(s, dict) and isinstance(s.get("source"), str):
                    if s["source"] not in sources:
                        raise ValueError(f"settings.{i}.source: unknown source '{s['source']}' "
                                         f"(the file's sources: {', '.join(map(str, sources))})")
                    s = {**s, "source": sources[s["source"]]}
                resolved.append(s)
            settings = resolved
        return {**data, "sources": sources, "settings": settings}

    @model_validator(mode="after")
    def _consistent(self) -> "ArchitectureProfiles":
        keys = [s.key for s in self.settings]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"settings: key '{twice[0]}' is used twice (keys are unique within a file)")
        unlisted = sorted({s.checkpoint for s in self.settings} - set(self.checkpoint_notes))
        if unlisted:
            raise ValueError(f"checkpoints: {unlisted[0]} has settings but is not listed")
        idle = sorted(set(self.checkpoint_notes) - {s.checkpoint for s in self.settings})
        if idle:
            raise ValueError(f"checkpoints: {idle[0]} has no setting")
        d = self.default
        chosen = self.setting(d.setting)
        if chosen is None:
            raise ValueError(f"default.setting: no setting has the key '{d.setting}'")
        if chosen.checkpoint != d.checkpoint:
            raise ValueError(f"default.checkpoint: setting '{d.setting}' is {chosen.checkpoint}'s, not {d.checkpoint}'s")
        result = chosen.result(d.task)
        if result is None or result.tpf is None:
            raise ValueError(f"default.task: setting '{d.setting}' has no tokens per forward for '{d.task}' "
                             "(commands take their default tokens per forward from it)")
        return self

    @property
    def default_task(self) -> str:
        return self.default.task

    def default_setting(self) -> Setting:
        return self.setting(self.default.setting)

    def setting(self, key: str) -> Setting | None:
        return next((s for s in self.settings if s.key == key), None)

    def checkpoints(self) -> list[str]:
        """The checkpoint ids with settings here, in the file's order."""
        return list(self.checkpoint_notes)

    def tasks(self) -> list[str]:
        """Every task some setting has a result for, in the order the file first names them."""
        return list(dict.fromkeys(t for s in self.settings for t in s.results))


# --- the spread proxy ------------------------------------------------------------------------------


def mix_tpfs(setting: Setting, task: str = DEFAULT_MIX) -> list[float]:
    """The tokens per forward of the setting on each member benchmark of the mix `task` (its
    source's `mixes`), in the source's order; empty when the task is no mix of that source."""
    members = setting.source.mixes.get(task, ())
    found = (setting.results.get(t) for t in members)
    return [r.tpf for r in found if r is not None and r.tpf is not None]


def tpf_spread(setting: Setting, task: str = DEFAULT_MIX) -> float | None:
    """Coefficient of variation (population standard deviation / mean) of the setting's tokens per
    forward across the member benchmarks of the mix `task`: a proxy for how TPF varies from one
    request to the next, since no source publishes a per-prompt spread. None when the task is no
    mix of the setting's source or fewer than two members have a TPF."""
    values = mix_tpfs(setting, task)
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)) / mean


# --- loading ----------------------------------------------------------------------------------------


def _where(exc: ValidationError, data: dict) -> str:
    """pydantic's first error, with a setting named by its key as well as its index."""
    message = files.validation_message(exc)
    loc = exc.errors()[0]["loc"]
    settings = data.get("settings")
    if len(loc) >= 2 and loc[0] == "settings" and isinstance(loc[1], int) and isinstance(settings, list) \
            and loc[1] < len(settings) and isinstance(settings[loc[1]], dict) \
            and isinstance(settings[loc[1]].get("key"), str):
        message += f" (setting '{shown(settings[loc[1]]['key'], 60)}')"
    return message


def _read(path: str | os.PathLike) -> dict:
    data = files.read_document(path, limit=MAX_PROFILE_FILE_BYTES, error=DecodingProfileError,
                               what="decoding profile", fmt="yaml")
    if not isinstance(data, dict):
        raise DecodingProfileError(f"decoding profile {shown(str(path))} must be a YAML mapping, got {type(data).__name__}")
    return data


def _validate(data: dict, path: str | os.PathLike) -> ArchitectureProfiles:
    try:
        return ArchitectureProfiles.model_validate(data)
    except ValidationError as exc:
        raise DecodingProfileError(f"decoding profile {shown(str(path))}: {_where(exc, data)}") from None


def read_profile_file(path: str | os.PathLike) -> ArchitectureProfiles:
    """A decoding-profile YAML, read by the one bounded reader and validated."""
    return _validate(_read(path), path)


def _yaml_files(path: str | os.PathLike) -> list[Path]:
    """The profile files a path names: itself, or the .yaml/.yml regular files of a folder."""
    return files.yaml_files(path, error=DecodingProfileError, what="decoding profile path")


class _File:
    """A profile file, read; validated when first asked for. Reading the bundled files is a lookup
    in the compiled table; validating all of them costs several milliseconds, which a command that
    needs one model's file should not pay at start-up."""

    def __init__(self, path: str | os.PathLike, data: dict | None = None, profiles: ArchitectureProfiles | None = None):
        self.path, self._data = path, data
        if profiles is not None:
            self.__dict__["profiles"] = profiles

    @cached_property
    def profiles(self) -> ArchitectureProfiles:
        return _validate(self._data, self.path)

    def ids(self) -> tuple[str, list[str]]:
        """The architecture and the checkpoints the file lists (from the raw data while it is well
        formed enough to say; otherwise validating it names what is wrong)."""
        if "profiles" not in self.__dict__:
            arch, listed = self._data.get("architecture"), self._data.get("checkpoints")
            if isinstance(arch, str) and isinstance(listed, dict) and all(isinstance(c, str) for c in listed):
                return arch, list(listed)
        return self.profiles.architecture, self.profiles.checkpoints()


@lru_cache(maxsize=1)
def _bundled_files() -> tuple[_File, ...]:
    """The shipped files, read once per process (each validated once, when first asked for)."""
    folder = bundled_decoding_dir()
    return tuple(_File(f, _read(f)) for f in _yaml_files(folder)) if folder.is_dir() else ()


def bundled_profiles() -> tuple[ArchitectureProfiles, ...]:
    """Every shipped file, validated."""
    return tuple(f.profiles for f in _bundled_files())


class ProfileDB:
    """The published decodings, by architecture and by checkpoint (case-insensitive). A user's
    file with the architecture of a bundled one replaces it; a checkpoint listed by two files is
    found in the later one (a user's file over the bundled ones). User files are validated when
    loaded, the bundled ones when first asked for."""

    def __init__(self, profiles: list[ArchitectureProfiles | _File] = (), bundled: tuple[_File, ...] = ()):
        given = [p if isinstance(p, _File) else _File(p.architecture, profiles=p) for p in profiles]
        by_architecture: dict[str, _File] = {}
        for f in (*bundled, *given):  # later files (the user's) replace earlier ones
            by_architecture[f.ids()[0].lower()] = f
        self._files = list(by_architecture.values())
        self._lookup: dict[str, _File] = {}
        for f in self._files:
            for checkpoint in f.ids()[1]:
                self._lookup[checkpoint.lower()] = f
        for f in self._files:  # an architecture's own id always finds its own file
            self._lookup[f.ids()[0].lower()] = f

    @classmethod
    def load(cls, extra_paths: list[str | os.PathLike] | None = None) -> "ProfileDB":
        user = [read_profile_file(f) for path in (extra_paths or []) for f in _yaml_files(path)]
        return cls(user, _bundled_files())

    @property
    def profiles(self) -> list[ArchitectureProfiles]:
        """Every file, validated, bundled ones first (in file-name order), then the user's."""
        return [f.profiles for f in self._files]

    def for_model(self, model_id: str) -> ArchitectureProfiles | None:
        """The file that holds `model_id` as its architecture or as one of its checkpoints."""
        found = self._lookup.get(str(model_id).lower())
        return None if found is None else found.profiles

    def __iter__(self):
        return iter(self.profiles)
