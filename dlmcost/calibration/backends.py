"""The array libraries `dlmcost measure` runs on: numpy (CPU, float32; always available) and torch
(the `measure` extra; CUDA in bf16 when present, else CPU in float32). Each backend is the same
small set of ops, so one decoder (calibration/layers.py) runs on either."""

from __future__ import annotations

import os

import numpy as np

from ..errors import MissingExtraError, UsageError, install_hint
from ..safe_text import shown


class NumpyBackend:
    name = "numpy"
    device = "cpu"
    itemsize = 4  # float32

    POOL = 1 << 20  # weights are tiled from a pool of random numbers: their values do not change the time
    out_of_memory: tuple[type[BaseException], ...] = (MemoryError,)  # what an allocation that fails raises

    def __init__(self, seed: int = 0):
        self.dtype = np.float32
        self.rng = np.random.default_rng(seed)
        self.pool = self.rng.standard_normal(self.POOL, dtype=np.float32)

    def randn(self, *shape, scale=1.0):
        """The pool tiled over `shape` and scaled, in one pass over a new array (one LM head in
        memory, not two; np.resize then an in-place scale went over it twice)."""
        w = np.empty(shape, dtype=self.dtype)
        flat, n, scale = w.reshape(-1), self.POOL, np.float32(scale)
        for start in range(0, flat.size, n):
            part = flat[start:start + n]
            np.multiply(self.pool[:part.size], scale, out=part)
        return w

    def ones(self, n):
        return np.ones(n, dtype=self.dtype)

    def array(self, values):
        return np.asarray(values, dtype=self.dtype)

    def tokens(self, B, q, vocab):
        return self.rng.integers(0, vocab, size=(B, q))

    def softmax(self, x):
        """Softmax over the last axis, in place (x is a temporary of the pass)."""
        x -= x.max(axis=-1, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=-1, keepdims=True)
        return x

    def confidence(self, p):
        """The sampler's per-position confidence and token (max and argmax of the probabilities)."""
        return p.max(axis=-1), p.argmax(axis=-1)

    def topk(self, x, k):
        idx = np.argpartition(x, -k, axis=-1)[:, -k:]
        return np.take_along_axis(x, idx, axis=-1), idx

    def tanh(self, x):
        return np.tanh(x, out=x)

    def rmsnorm(self, x, w):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w

    def silu(self, x):
        return x / (1.0 + np.exp(-x))

    def transpose_last(self, x):
        """A matrix's transpose is a view (BLAS reads it transposed); a stack of them is copied:
        numpy's batched matmul of a transposed view skips BLAS and runs ~1000x slower."""
        t = np.swapaxes(x, -1, -2)
        return t if x.ndim == 2 else np.ascontiguousarray(t)

    def permute(self, x, *axes):
        return x.transpose(*axes)

    def mask(self, q: int, kept: int, c: int, causal: bool, window: int | None):
        """Additive mask of q queries (absolute positions c..c+q-1) over kept cached keys (positions
        c-kept..c-1) and the q new ones: key j is seen by query i when j <= i (causal) and
        |i - j| < window (sliding layers). None when every query sees every key."""
        i = np.arange(c, c + q)[:, None]
        j = np.arange(c - kept, c + q)[None, :]
        seen = np.ones((q, kept + q), bool)
        if causal:
            seen &= j <= i
        if window is not None:
            seen &= np.abs(i - j) < window
        if seen.all():
            return None
        return np.where(seen, 0.0, -np.inf).astype(np.float32)

    def sync(self):
        pass


class TorchBackend(NumpyBackend):
    name = "torch"

    def __init__(self, device: str | None = None, seed: int = 0):
        try:
            import torch
        except ModuleNotFoundError as exc:
            if exc.name != "torch":  # torch is there, but something it imports is not
                raise _failed_to_load(exc) from None
            raise MissingExtraError(f"the torch backend needs PyTorch: {install_hint('measure')}") from None
        except Exception as exc:  # noqa: BLE001 - whatever the installed torch raises as it loads
            raise _failed_to_load(exc) from None
        self.torch = torch
        self.out_of_memory = (MemoryError, getattr(torch.cuda, "OutOfMemoryError", MemoryError))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is visible to PyTorch")
        self.dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.itemsize = 2 if self.dtype == torch.bfloat16 else 4
        self.gen = torch.Generator(device=self.device).manual_seed(seed)

    def randn(self, *shape, scale=1.0):
        t = self.torch
        return t.randn(shape, generator=self.gen, device=self.device, dtype=self.dtype).mul_(scale)

    def ones(self, n):
        return self.torch.ones(n, device=self.device, dtype=self.dtype)

    def array(self, values):
        return self.torch.tensor(values, device=self.device, dtype=self.dtype)

    def tokens(self, B, q, vocab):
        return self.torch.randint(0, vocab, (B, q), generator=self.gen, device=self.device)

    def softmax(self, x):
        return self.torch.softmax(x.float(), dim=-1).to(x.dtype)

    def confidence(self, p):
        return p.max(dim=-1)

    def topk(self, x, k):
        return self.torch.topk(x, k, dim=-1)

    def tanh(self, x):
        return self.torch.tanh(x)

    def rmsnorm(self, x, w):
        return x * self.torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + 1e-6) * w

    def silu(self, x):
        return self.torch.nn.functional.silu(x)

    def transpose_last(self, x):
        return x.transpose(-1, -2)

    def permute(self, x, *axes):
        return x.permute(*axes)

    def mask(self, q, kept, c, causal, window):
        m = super().mask(q, kept, c, causal, window)
        return None if m is None else self.torch.from_numpy(m).to(device=self.device, dtype=self.dtype)

    def sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()


def _failed_to_load(exc: Exception) -> MissingExtraError:
    """PyTorch installed but failing to import (a missing CUDA library: `OSError: libcudart.so.12:
    cannot open shared object file`, a half-upgraded package): the measure extra's failure, with
    its reason (exit 9, as `--plot` with a matplotlib that fails to load), not a dlmcost bug."""
    reason = " ".join(str(exc).split()) or "no message"
    return MissingExtraError(f"the torch backend needs PyTorch, which failed to load ({type(exc).__name__}: "
                             f"{shown(reason)}): check its CUDA libraries (LD_LIBRARY_PATH) or reinstall it: "
                             "pip install 'dlmcost[measure]'")


def get_backend(name: str, device: str | None = None):
    if name == "numpy":
        if device not in (None, "cpu"):
            raise UsageError("the numpy backend runs on the CPU only (--device cpu)")
        return NumpyBackend()
    if name == "torch":
        return TorchBackend(device)
    raise UsageError(f"unknown backend '{name}': use numpy or torch")


def available_bytes(be) -> tuple[float, str]:
    """What measure may hold at once, and where the number comes from: 90% of the free memory of
    the CUDA device; else the least of 80% of the memory the OS says is available (MemAvailable;
    else half the physical memory), 80% of what the process's address-space limit leaves
    (RLIMIT_AS, `ulimit -v`) and 80% of what its memory cgroup's limit leaves (memory.max, as
    containers and CI runners set)."""
    if be.device.startswith("cuda"):
        free, _ = be.torch.cuda.mem_get_info()
        return 0.9 * free, "90% of the GPU's free memory"
    bounds = [_machine_memory()]
    left = address_space_left()
    if left is not None:
        bounds.append((0.8 * left, "80% of what the process's address-space limit (ulimit -v) leaves"))
    left = cgroup_memory_left()
    if left is not None:
        bounds.append((0.8 * left, "80% of what the memory cgroup's limit leaves"))
    return min(bounds, key=lambda b: b[0])


def _machine_memory() -> tuple[float, str]:
    """80% of the memory the OS says is available (MemAvailable), else half the physical memory."""
    available = _proc_kib("/proc/meminfo", "MemAvailable:")
    if available is not None:
        return 0.8 * available, "80% of the memory available"
    try:
        return 0.5 * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "half the physical memory"
    except (OSError, ValueError, AttributeError):
        return 8 * 2**30, "8 GiB (the machine's memory is unknown)"


def _proc_kib(path: str, key: str) -> float | None:
    """Bytes of a `key: N kB` line of a /proc file (None: no such file or line)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        pass
    return None


def address_space_left() -> float | None:
    """Bytes the process may still map under its address-space limit (RLIMIT_AS), None without
    one: the limit less what is mapped already (VmSize)."""
    try:
        import resource

        limit, _ = resource.getrlimit(resource.RLIMIT_AS)
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError, AttributeError):  # not a POSIX system
        return None
    if limit == unlimited or limit < 0:
        return None
    return max(limit - (_proc_kib("/proc/self/status", "VmSize:") or 0.0), 0.0)


_NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as the largest page-aligned int64


def cgroup_memory_left() -> float | None:
    """Bytes the process's memory cgroup may still take (its limit less its usage), None without
    a limit: cgroup v2 (memory.max, memory.current) or v1 (memory.limit_in_bytes,
    memory.usage_in_bytes), at the path /proc/self/cgroup names or at the root a container sees."""
    for limit_file, usage_file in _cgroup_files():
        limit = _read_bytes_number(limit_file)
        if limit is None:
            continue
        if limit >= _NO_LIMIT:
            return None
        return max(limit - (_read_bytes_number(usage_file) or 0), 0)
    return None


def _cgroup_files() -> list[tuple[str, str]]:
    root, found = "/sys/fs/cgroup", []
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read(1 << 16).splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.rstrip("/")
        if controllers == "":
            found.append((f"{root}{path}/memory.max", f"{root}{path}/memory.current"))
        elif "memory" in controllers.split(","):
            found.append((f"{root}/memory{path}/memory.limit_in_bytes", f"{root}/memory{path}/memory.usage_in_bytes"))
    return found + [(f"{root}/memory.max", f"{root}/memory.current"),
                    (f"{root}/memory/memory.limit_in_bytes", f"{root}/memory/memory.usage_in_bytes")]


def _read_bytes_number(path: str) -> int | None:
    """A cgroup file's number of bytes ("max" is no limit), None if it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(64).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text == "max":
        return _NO_LIMIT
    return int(text) if text.isdigit() else None
