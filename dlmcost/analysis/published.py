"""The decoding a model was published with: its tokens per forward and accuracy on a task, from
the bundled published decodings (decoding/*.yaml, docs/decoding.md).

Every command takes its default tokens per forward from here: the model's own published
decoding (its file's `default` setting) on the task asked for (`--task`; the file's default task
otherwise). A task that is a mix of benchmarks (`general`: a report's average over its 33
benchmarks) stands for traffic drawn from all of them: requests then decode at their own
benchmark's rate, so the mix runs at the harmonic mean of the member TPFs (passes add up per
token, not tokens per pass), and the spread of passes per block across the members is the
per-request spread a serving simulation draws from (no source publishes one across prompts).

A quality floor (`--min-accuracy TASK=VALUE`) keeps the settings of the model's own checkpoint
whose published accuracy on TASK reaches VALUE, each at its tokens per forward on TASK (or, where
the source publishes accuracy but no TPF for TASK, on the setting's default mix, said so).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

from ..engine.schemes import REGISTRY
from ..errors import UsageError
from ..inputs.names import task_key
from ..inputs.models import ModelSpec
from ..safe_text import shown


@dataclass(frozen=True)
class Published:
    """A published decoding of a checkpoint on a task, and what it gives the cost model."""

    checkpoint: str
    setting: str  # the file's key
    name: str  # readable: "threshold 0.95, block 32"
    scheme: str
    block: int | None
    task: str  # the task asked for
    tpf: float  # tokens per forward the cost model runs (a mix's: the harmonic mean of its members')
    tpf_task: str  # the task the TPF is from (the setting's default mix where `task` has none published)
    tpf_published: float  # as the source prints it (a mix's: its average row)
    accuracy: float | None  # on `task` (None: not published)
    spread: float  # coefficient of variation of passes per block across a mix's members (0: none)
    source: str  # reference, location (short: a header's)
    source_title: str

    @property
    def label(self) -> str:
        return f"{self.checkpoint.rsplit('/', 1)[-1]} {self.name}"

    def record(self) -> dict:
        return asdict(self) | dict(label=self.label)


@lru_cache(maxsize=4)
def _db(extra: tuple[str, ...]):
    from ..inputs.decoding_profiles import ProfileDB

    return ProfileDB.load(list(extra) or None)


def profiles_for(model_id: str, extra: list[str] | None = None):
    """The published decodings of the model's architecture (None: none bundled or given)."""
    return _db(tuple(extra or ())).for_model(model_id)


def _mix_members(setting, task: str) -> list:
    members = setting.source.mixes.get(task, ())
    return [r for r in (setting.results.get(t) for t in members) if r is not None and r.tpf]


def _tpf_and_spread(setting, task: str) -> tuple[float, float] | None:
    """(tokens per forward the cost model runs, spread of passes per block) on `task`; None
    without a published TPF there. A mix: its members' harmonic mean and the CV of 1 / TPF."""
    members = _mix_members(setting, task)
    if len(members) >= 2:
        passes = [1.0 / r.tpf for r in members]
        mean = math.fsum(passes) / len(passes)
        cv = math.sqrt(math.fsum((p - mean) ** 2 for p in passes) / len(passes)) / mean
        return 1.0 / mean, cv
    r = setting.result(task)
    return (r.tpf, 0.0) if r is not None and r.tpf else None


def _default_mix(setting) -> str | None:
    mixes = [m for m in setting.source.mixes if _tpf_and_spread(setting, m)]
    return mixes[0] if mixes else None


def _same_decoding(setting, others) -> list:
    """The setting, then the settings of other sources that ran the same decoding of the same
    checkpoint (scheme, block, threshold, mode): where one source gives the accuracy and another
    the tokens per forward of it."""
    key = (setting.checkpoint, setting.scheme, setting.block, setting.threshold, setting.mode)
    return [setting] + [s for s in others if s is not setting and
                        (s.checkpoint, s.scheme, s.block, s.threshold, s.mode) == key]


def published(setting, task: str, *, fallback: bool = False, others=()) -> Published | None:
    """The setting on `task`; None without a TPF there. With `fallback`, where the task has a
    published accuracy but no TPF: the same decoding's TPF on the task from another source
    (`others`: the file's settings), else its default mix's."""
    found, tpf_setting, tpf_task = _tpf_and_spread(setting, task), setting, task
    result = setting.result(task)
    if found is None and fallback and result is not None and result.accuracy is not None:
        candidates = _same_decoding(setting, others)
        for s in candidates:  # the task itself, in another source of the same decoding
            if (found := _tpf_and_spread(s, task)) is not None:
                tpf_setting = s
                break
        for s in candidates if found is None else ():  # else a mix of one of them
            mix = _default_mix(s)
            if mix is not None:
                found, tpf_setting, tpf_task = _tpf_and_spread(s, mix), s, mix
                break
    if found is None:
        return None
    tpf, spread = found
    printed = tpf_setting.result(tpf_task)
    src = tpf_setting.source
    location = (printed.location if printed is not None else "") or ""
    source = src.ref.split(";")[0].strip() + (f", {location.split(',')[0].split('(')[0].strip()}" if location else "")
    return Published(checkpoint=setting.checkpoint, setting=setting.key, name=setting.name, scheme=setting.scheme,
                     block=setting.block, task=task, tpf=tpf, tpf_task=tpf_task,
                     tpf_published=printed.tpf if printed is not None and printed.tpf else tpf,
                     accuracy=result.accuracy if result is not None else None, spread=spread, source=source,
                     source_title=src.title)


def default_decoding(spec: ModelSpec, scheme: str | None = None, task: str | None = None,
                     extra: list[str] | None = None) -> Published | None:
    """The model's own published decoding on `task` (None: its file's default task), if its
    scheme is `scheme` (None: any). None when nothing is published for the model, or for that
    scheme; a task asked for without a published TPF is an error that lists the tasks that have one."""
    profiles = profiles_for(spec.id, extra)
    if profiles is None:
        if task is not None:
            raise UsageError(f"--task: no published decodings for {shown(spec.id)} (`dlmcost decodings` lists the "
                             "models that have them); give --tpf or --steps")
        return None
    setting = _own_default(profiles, spec.id)
    if setting is None or (scheme is not None and setting.scheme != scheme):
        return None
    chosen = profiles.default_task if task is None else task  # a blank --task is a task not published
    found = published(setting, chosen)
    if found is None:
        if task is None:
            return None
        have = [t for t in setting.results if _tpf_and_spread(setting, t)]
        raise UsageError(f"--task: {setting.label} has no published tokens per forward for '{shown(task)}'; "
                         f"published for: {', '.join(have)} (or give --tpf)")
    return found


def default_for(profiles, model_id: str) -> tuple[str, str] | None:
    """(setting key, task) of the decoding commands use for `model_id` by default: the file's own
    default for its architecture and default checkpoint, a twin checkpoint's first setting for a
    twin (LLaDA2.1-mini's S mode); None for an id the file does not hold."""
    setting = _own_default(profiles, model_id)
    return None if setting is None else (setting.key, profiles.default_task)


def _own_default(profiles, model_id: str):
    """The default setting of the file, or, for a checkpoint that is not the file's default one,
    that checkpoint's first setting."""
    setting = profiles.default_setting()
    if setting.checkpoint.lower() == model_id.lower() or profiles.architecture.lower() == model_id.lower():
        return setting
    return next((s for s in profiles.settings if s.checkpoint.lower() == model_id.lower()), None)


def accuracy_tasks(spec: ModelSpec, extra: list[str] | None = None) -> list[str] | None:
    """The tasks the model's own checkpoint has a published accuracy on, in name order (None:
    nothing is published for it)."""
    profiles = profiles_for(spec.id, extra)
    mine = _own_default(profiles, spec.id) if profiles is not None else None
    if mine is None:
        return None
    return sorted({task for s in profiles.settings if s.checkpoint == mine.checkpoint
                   for task, r in s.results.items() if r.accuracy is not None})


def meeting_floor(spec: ModelSpec, floor_task: str, floor: float, task: str | None = None,
                  extra: list[str] | None = None) -> tuple[list[Published], str]:
    """The model's own checkpoint's published settings whose accuracy on `floor_task` reaches
    `floor`, each at its tokens per forward on `task` (None: `floor_task`; a setting without a TPF
    there takes its default mix's), and a sentence on what was kept and why."""
    profiles = profiles_for(spec.id, extra)
    mine = _own_default(profiles, spec.id) if profiles is not None else None
    if mine is None:
        return [], f"{spec.id}: no published decodings"
    scored = [(s, s.result(floor_task)) for s in profiles.settings if s.checkpoint == mine.checkpoint]
    scored = [(s, r) for s, r in scored if r is not None and r.accuracy is not None]
    if not scored:
        return [], f"{spec.id}: no published accuracy on {floor_task}"
    out = [p for s, r in scored if r.accuracy >= floor
           if (p := published(s, task or floor_task, fallback=True, others=profiles.settings)) is not None]
    best = max(r.accuracy for _, r in scored)
    return out, (f"{spec.id}: {len(out)} of {len(scored)} published settings reach {floor_task} >= {floor:g}"
                 + ("" if out else f" (the best published: {best:g})"))


def parse_floor(text: str) -> tuple[str, float]:
    """'gsm8k=0.85' (or 85%) -> ('gsm8k', 0.85)."""
    task, sep, value = text.partition("=")
    value = value.strip().rstrip("%")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if text.strip().endswith("%"):
        number /= 100
    if not sep or not task.strip() or not (0 < number <= 1):
        raise UsageError(f"--min-accuracy: expected TASK=FRACTION (e.g. gsm8k=0.85 or gsm8k=85%), got '{shown(text)}'")
    return task_key(task), number


def autoregressive(scheme: str) -> bool:
    return REGISTRY[scheme].autoregressive
