"""Write the small example traces under examples/traces/, one per format dlmcost replays.

    python scripts/make_traces.py            # (re)write examples/traces/
    python scripts/make_traces.py --check    # exit 1 if a committed file differs from what this writes

Nothing is downloaded: the traces are drawn here, from Python's `random.Random(2024)`, whose
`random()` sequence is guaranteed the same on every Python version; every distribution is made
from it by hand (inverse transforms) so that the files do not change with numpy or Python.

What they imitate, from the papers that published the real traces:

- azure-conv.csv: the Azure LLM inference trace, conversation (Splitwise, Patel et al., ISCA
  2024): prompts of about 1,000 tokens at the median and answers of about 130, long-tailed;
  `TIMESTAMP` a date and time in 100 ns ticks (7 fractional digits), as the published files;
- mooncake.jsonl: the Mooncake conversation trace (Qin et al., FAST 2025): long prompts (several
  thousand tokens, up to 128k), answers of a few hundred; `timestamp` in ms from the start;
  `hash_ids` one id per 512-token block, later requests of a conversation sharing its prefix;
- burstgpt.csv: BurstGPT (Wang et al., 2024): ChatGPT and GPT-4 requests, whole-second
  timestamps, and a few failed requests (0 response tokens), as the published log has.

Arrivals are bursty in all three: inter-arrival times from a two-phase hyperexponential (most
gaps short, within a burst; a few long, between bursts), a coefficient of variation of about 3
where a Poisson process has 1.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "examples" / "traces"
REQUESTS = 300
SEED = 2024


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    """A lognormal draw (Box-Muller from two uniforms), rounded and clipped to [low, high]."""
    u1, u2 = rng.random(), rng.random()
    z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
    return min(high, max(low, round(median * math.exp(sigma * z))))


def _gap(rng: random.Random, burst_mean: float, lull_mean: float, lull_share: float = 0.1) -> float:
    """A hyperexponential inter-arrival time: exponential of `burst_mean` or, with probability
    `lull_share`, of `lull_mean` (0.9 x 0.05 + 0.1 x 1.5 s: mean 0.195 s, CV about 3.3)."""
    mean = lull_mean if rng.random() < lull_share else burst_mean
    return -mean * math.log(1.0 - rng.random())


def azure_conv(rng: random.Random) -> str:
    start = 17001585466805900  # 2023-11-16 18:15:46.6805900 UTC, in 100 ns ticks since 1970
    ticks = start
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(REQUESTS):
        seconds, frac = divmod(ticks, 10_000_000)
        day, rest = divmod(seconds, 86400)
        stamp = _date(day) + f" {rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}.{frac:07d}"
        lines.append(f"{stamp},{_lognormal(rng, 1020, 1.0, 2, 16000)},{_lognormal(rng, 129, 0.9, 1, 4000)}")
        ticks += round(_gap(rng, 0.05, 1.5) * 1e7)
    return "\n".join(lines) + "\n"


def _date(days: int) -> str:
    import datetime

    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat()


def mooncake(rng: random.Random) -> str:
    block = 512
    t_ms = 0.0
    next_id = 0
    earlier: list[list[int]] = []
    lines = []
    for _ in range(REQUESTS):
        prompt = _lognormal(rng, 7000, 0.8, 64, 128000)
        answer = _lognormal(rng, 300, 0.8, 1, 2000)
        blocks = math.ceil(prompt / block)
        shared: list[int] = []
        if earlier and rng.random() < 0.5:  # a later turn of an earlier conversation: its prefix again
            shared = earlier[int(rng.random() * len(earlier))][:blocks]
        ids = shared + list(range(next_id, next_id + blocks - len(shared)))
        next_id += blocks - len(shared)
        earlier.append(ids)
        lines.append(json.dumps({"timestamp": round(t_ms), "input_length": prompt, "output_length": answer,
                                 "hash_ids": ids}, separators=(", ", ": ")))
        t_ms += _gap(rng, 50.0, 3000.0)
    return "\n".join(lines) + "\n"


def burstgpt(rng: random.Random) -> str:
    t = 0.0
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for _ in range(REQUESTS):
        model = "GPT-4" if rng.random() < 0.2 else "ChatGPT"
        log = "API log" if rng.random() < 0.3 else "Conversation log"
        request = _lognormal(rng, 600, 1.1, 1, 30000)
        response = 0 if rng.random() < 0.04 else _lognormal(rng, 200, 1.0, 1, 4000)  # 0: a failed request
        lines.append(f"{math.floor(t)},{model},{request},{response},{request + response},{log}")
        t += _gap(rng, 0.5, 15.0)
    return "\n".join(lines) + "\n"


def generate() -> dict[str, str]:
    """File name -> contents, the same on every run."""
    rng = random.Random(SEED)
    return {"azure-conv.csv": azure_conv(rng), "mooncake.jsonl": mooncake(rng), "burstgpt.csv": burstgpt(rng)}


def main(argv: list[str]) -> int:
    texts = generate()
    if "--check" in argv:
        stale = [n for n, text in texts.items()
                 if not (FOLDER / n).is_file() or (FOLDER / n).read_text(encoding="utf-8") != text]
        for name in stale:
            print(f"examples/traces/{name} is stale: run python scripts/make_traces.py", file=sys.stderr)
        return 1 if stale else 0
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (FOLDER / name).write_text(text, encoding="utf-8", newline="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
