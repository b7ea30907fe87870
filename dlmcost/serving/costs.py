"""Money and energy of a deployment, the formulas `serve` reports and `plan` ranks by.

    $/hour          = GPUs x price per GPU-hour
    $/Mtok          = $/hour / (output tok/s x 3600) x 1e6
    J/token         = GPUs x board power (W) x power utilisation / output tok/s

$/Mtok is at the offered load: provisioned GPUs are paid for whether busy or not. A GPU without a
price has no costs (None).
"""

from __future__ import annotations


def usd_per_hour(gpus: int, price_per_gpu_hour: float) -> float:
    return gpus * price_per_gpu_hour


def usd_per_mtok(usd_hour: float, output_tokens_per_s: float) -> float:
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6


def joules_per_token(gpus: int, board_power_w: float | None, power_utilisation: float,
                     output_tokens_per_s: float) -> float | None:
    if board_power_w is None:
        return None
    return gpus * board_power_w * power_utilisation / output_tokens_per_s
