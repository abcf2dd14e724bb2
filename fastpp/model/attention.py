"""The attention core's kernel: FlashAttention's measured speed by sequence length, head
dimension, causal mask and pass.

A fused attention kernel (FlashAttention-2 and -3, cuDNN's) is not a dense product: its speed
grows with the length each query tile loops over (the pipeline's fill and the softmax's
rescaling amortized over more key tiles) and saturates, and a causal mask costs the diagonal
tiles and the idle tail of the grid. Each kernel's TFLOP/s is a saturating curve in the
sequence length ``s``

    TFLOP/s(s) = E s / (s + c)

per pass and head dimension ``d`` (FLOPs as the FlashAttention papers count them: forward
``4 s^2 d a`` per sequence, halved with a causal mask; backward 2.5 times the forward),
``E`` and ``c`` a least-squares fit of ``1 / TFLOP/s`` against ``1 / s`` (linear in both).
Between the measured head dimensions ``E`` and ``c`` are interpolated in ``log d``, and held
at the nearest one outside them.

The data (``shared/data/attention_kernels.csv``, ``fit_kernels``): FlashAttention-3's paper,
Figures 5 and 6 (H100 SXM5 at a fixed 1830 MHz, 16k tokens per batch), and FlashAttention-2's
README figures for A100 (and, for the first FlashAttention, H100). What fits and what checks
(``kernel_rows``):

- fitted: the sequence lengths 512, 2048 and 8192 of each curve;
- checked: 1024, 4096 and 16384 (held out of every fit), and the causal transfer below.

The kernel per GPU (``KERNEL_OF``):

- H100, H200, H800: cuDNN's fused attention (bf16), the kernel Transformer Engine runs on
  Hopper, forward and backward measured separately; its backward (as FlashAttention-3's) was
  measured without a mask only, so a causal backward is its non-causal curve times the
  forward's causal-over-non-causal ratio at the same ``s`` and ``d``. That transfer is
  checked on FlashAttention-2 on H100, whose causal forward-and-backward was measured (README
  figure): predicted from its separate forward and backward curves, held out of them.
- A100: FlashAttention-2, measured only forward and backward together: both passes at that
  curve's efficiency.
- B200, GB200, B300 and GB300: no measured kernel here; assumed H100's cuDNN at the same
  fraction of the dense bf16 peak (a Blackwell kernel, cuDNN's or FlashAttention-4, has its
  own curve; none to check it on).
- any other ``Hardware`` (a user's, a test's): the dense-product curve of
  ``fastpp.model.compute`` at ``s x s x d``, as before this model.

A stack that runs another kernel measured on its GPU (FlashAttention-2 through PyTorch's
``scaled_dot_product_attention`` or the flash-attn package, FlashAttention-3) is priced with
``with_attention_kernel``: on H100 at 8K-1M causal keys and head dimension 128,
FlashAttention-2 runs at 0.63-0.68 of cuDNN's curve, FlashAttention-3 at 1.14-1.19. The
Blackwell presets take their assumed kernel alone: no kernel was measured on them. The first
FlashAttention (CUDA), measured forward and backward together in the same README figures on
A100 and H100 (0.4-0.7 of FlashAttention-2's speed on A100), prices older stacks: on A100,
llm-foundry's MPT runs (``fastpp.model.validate_foundry``), as a stand-in for the kernel they
ran, FlashAttention in Triton (``flash_attn_triton.py``), which no table here measures and
whose author states its forward and backward together run slightly slower than it.

A run's software stack can be slower or faster than the kernels the table measured (an older
cuDNN, a framework's wrappers round each call): ``with_attention_speed`` gives a
``Hardware`` whose kernel runs at a stated multiple of its curve (``StackHardware``;
``fastpp.model.validate_long`` calibrates NeMo's on its longest rows).

The fraction of the peak is the kernel's TFLOP/s over the GPU's dense bf16 peak (989 TFLOP/s
for H100 at its 1980 MHz boost clock; the paper fixed 1830 MHz, so the measured fractions are
what a clock-throttled training run reaches). The attention runs in bf16 under an fp8 recipe
(Transformer Engine's default): the fp8 rows of the table are not used.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..checks import ScheduleError, flag, numbers, one_of
from .hardware import Hardware

# (gpu, implementation, pass, causal, head_dim): (E in TFLOP/s, c in tokens), fitted by
# ``fit_kernels`` on the fit lengths (512, 2048, 8192); tests/test_attention.py refits them
FITS = {
    ('A100', 'FlashAttention', 'forward+backward', False, 64): (111, 112),
    ('A100', 'FlashAttention', 'forward+backward', False, 128): (80, 30),
    ('A100', 'FlashAttention', 'forward+backward', True, 64): (92, 305),
    ('A100', 'FlashAttention', 'forward+backward', True, 128): (80, 234),
    ('A100', 'FlashAttention-2', 'forward+backward', False, 64): (178, 177),
    ('A100', 'FlashAttention-2', 'forward+backward', False, 128): (206, 210),
    ('A100', 'FlashAttention-2', 'forward+backward', True, 64): (175, 506),
    ('A100', 'FlashAttention-2', 'forward+backward', True, 128): (192, 482),
    ('H100', 'FlashAttention', 'forward+backward', False, 64): (165, 27),
    ('H100', 'FlashAttention', 'forward+backward', False, 128): (134, 32),
    ('H100', 'FlashAttention', 'forward+backward', True, 64): (153, 240),
    ('H100', 'FlashAttention', 'forward+backward', True, 128): (127, 162),
    ('H100', 'FlashAttention-2', 'backward', False, 64): (296, 254),
    ('H100', 'FlashAttention-2', 'backward', False, 128): (329, 276),
    ('H100', 'FlashAttention-2', 'forward', False, 64): (328, 82),
    ('H100', 'FlashAttention-2', 'forward', False, 128): (378, 114),
    ('H100', 'FlashAttention-2', 'forward', False, 256): (332, 105),
    ('H100', 'FlashAttention-2', 'forward', True, 64): (308, 365),
    ('H100', 'FlashAttention-2', 'forward', True, 128): (356, 441),
    ('H100', 'FlashAttention-2', 'forward', True, 256): (308, 246),
    ('H100', 'FlashAttention-2', 'forward+backward', False, 64): (301, 206),
    ('H100', 'FlashAttention-2', 'forward+backward', False, 128): (347, 203),
    ('H100', 'FlashAttention-2', 'forward+backward', True, 64): (293, 551),
    ('H100', 'FlashAttention-2', 'forward+backward', True, 128): (330, 524),
    ('H100', 'FlashAttention-3', 'backward', False, 64): (504, 435),
    ('H100', 'FlashAttention-3', 'backward', False, 128): (601, 460),
    ('H100', 'FlashAttention-3', 'forward', False, 64): (518, 283),
    ('H100', 'FlashAttention-3', 'forward', False, 128): (678, 228),
    ('H100', 'FlashAttention-3', 'forward', False, 256): (797, 331),
    ('H100', 'FlashAttention-3', 'forward', True, 64): (513, 818),
    ('H100', 'FlashAttention-3', 'forward', True, 128): (668, 656),
    ('H100', 'FlashAttention-3', 'forward', True, 256): (709, 753),
    ('H100', 'cuDNN', 'backward', False, 64): (458, 368),
    ('H100', 'cuDNN', 'backward', False, 128): (551, 411),
    ('H100', 'cuDNN', 'forward', False, 64): (419, 128),
    ('H100', 'cuDNN', 'forward', False, 128): (630, 133),
    ('H100', 'cuDNN', 'forward', False, 256): (604, 143),
    ('H100', 'cuDNN', 'forward', True, 64): (398, 393),
    ('H100', 'cuDNN', 'forward', True, 128): (567, 407),
    ('H100', 'cuDNN', 'forward', True, 256): (523, 357),
}

FIT_LENGTHS = (512, 2048, 8192)
KERNEL_OF = (("A100", ("A100", "FlashAttention-2", 312e12)),
             ("H100", ("H100", "cuDNN", 989e12)),
             ("H200", ("H100", "cuDNN", 989e12)),
             ("H800", ("H100", "cuDNN", 989e12)),
             ("B200", ("H100", "cuDNN", 989e12)),
             ("GB200", ("H100", "cuDNN", 989e12)),
             ("B300", ("H100", "cuDNN", 989e12)),
             ("GB300", ("H100", "cuDNN", 989e12)))
# the GPUs whose kernel is assumed from H100's (the module): no other kernel is offered
ASSUMED = ("B200", "GB200", "B300", "GB300")
PASSES = ("forward", "backward", "forward+backward")
IMPLEMENTATIONS = ("FlashAttention", "FlashAttention-2", "FlashAttention-3", "cuDNN")


@dataclass(frozen=True)
class StackHardware(Hardware):
    """A ``Hardware`` whose attention is one software stack's: the measured kernel
    ``attention_kernel`` of its GPU (``""``: the GPU's own, ``KERNEL_OF``), at
    ``attention_speed`` times its curve, a number in (0, 2] (the product never past the
    GPU's peak)."""

    attention_speed: float = 1.0
    attention_kernel: str = ""

    def __post_init__(self):
        super().__post_init__()
        if (isinstance(self.attention_speed, bool)
                or not isinstance(self.attention_speed, int | float | np.number)
                or not 0.0 < float(self.attention_speed) <= 2.0):
            raise ScheduleError(f"attention_speed must be a number in (0, 2] (got "
                                f"{self.attention_speed!r})")
        if self.attention_kernel != "":
            one_of(self.attention_kernel, "attention_kernel", measured_kernels(self))


def with_attention_speed(hardware: Hardware, speed: float) -> StackHardware:
    """``hardware`` with its attention kernel at ``speed`` times its measured curve (the
    products, links, kernel and everything else unchanged); ``hardware`` must run a measured
    kernel (``kernel_of``)."""
    return _stack(hardware, "speed", attention_speed=speed)


def with_attention_kernel(hardware: Hardware, implementation: str) -> StackHardware:
    """``hardware`` with its attention priced by another measured kernel of its GPU (the
    attention of a stack that runs it; its speed, and everything else, unchanged).

    Parameters
    ----------
    hardware : Hardware
        Running a measured kernel (``kernel_of``; ``measured_kernels`` lists what it
        takes): the H100 family ``"cuDNN"`` (its default), ``"FlashAttention-2"`` or
        ``"FlashAttention-3"``; A100 ``"FlashAttention-2"`` (its default); both
        ``"FlashAttention"`` (the first, CUDA); Blackwell, whose kernel is
        assumed H100's cuDNN at the same fraction of the peak, that alone.
    implementation : str

    Returns
    -------
    StackHardware

    Raises
    ------
    ScheduleError
        If ``hardware`` runs no measured kernel, or ``implementation`` was not measured on
        its GPU.

    Examples
    --------
    >>> from fastpp.model import HARDWARE
    >>> fa2 = with_attention_kernel(HARDWARE["H100-80GB"], "FlashAttention-2")
    >>> kernel_of(fa2)[1]
    'FlashAttention-2'
    """
    if implementation == "":  # (StackHardware's "": the GPU's own kernel, never a name given)
        raise ScheduleError("implementation must name a measured kernel (got '')")
    return _stack(hardware, "kernel", attention_kernel=implementation)


def _stack(hardware, what: str, **stack) -> StackHardware:
    """``hardware`` as a ``StackHardware`` with the ``stack`` fields replaced (a
    ``StackHardware`` keeps the others)."""
    if not isinstance(hardware, Hardware):
        raise ScheduleError(f"hardware must be a fastpp.model.Hardware (got "
                            f"{type(hardware).__name__})")
    if _own_kernel(hardware) is None:
        raise ScheduleError(f"hardware must run a measured attention kernel (a name starting "
                            f"with one of {[p for p, _ in KERNEL_OF]}) to set its {what} (got "
                            f"{hardware.name!r})")
    values = {f.name: getattr(hardware, f.name) for f in fields(Hardware)}
    kept = {"attention_speed": getattr(hardware, "attention_speed", 1.0),
            "attention_kernel": getattr(hardware, "attention_kernel", "")}
    return StackHardware(**values, **{**kept, **stack})


def kernel_rows(path):
    """The bf16 rows of ``attention_kernels.csv`` of the kernels ``IMPLEMENTATIONS`` names
    (TFLOP/s): a list of dicts with ``gpu``, ``implementation``, ``pass``, ``causal``,
    ``d``, ``s``, ``tflops``, ``role`` (``"fit"`` at ``FIT_LENGTHS``, else ``"check"``)."""
    import csv

    rows = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if (r["precision"] != "fp16/bf16" or r["unit"] != "TFLOP/s"
                    or r["implementation"] not in IMPLEMENTATIONS):
                continue
            s = int(r["seq_len"])
            rows.append({"gpu": r["hardware"][:4], "implementation": r["implementation"],
                         "pass": r["pass"], "causal": r["causal"] == "True",
                         "d": int(r["head_dim"]), "s": s, "tflops": float(r["value"]),
                         "role": "fit" if s in FIT_LENGTHS else "check"})
    return rows


def fit_kernels(rows) -> dict:
    """``FITS`` from ``kernel_rows``' fit rows: per curve, ``1/y = 1/E + (c/E)/s`` by least
    squares (rounded: E to 1 TFLOP/s, c to 1 token)."""
    groups: dict = {}
    for r in rows:
        if r["role"] == "fit":
            key = (r["gpu"], r["implementation"], r["pass"], r["causal"], r["d"])
            groups.setdefault(key, []).append((r["s"], r["tflops"]))
    fits = {}
    for key, points in sorted(groups.items()):
        s, y = np.array(points, np.float64).T
        slope, intercept = np.polyfit(1.0 / s, 1.0 / y, 1)
        fits[key] = (round(1.0 / intercept), round(slope / intercept))
    return fits


def _curve(fits, gpu, implementation, kind, causal, d, s):
    """TFLOP/s of one measured pass at head dimension ``d`` (interpolated in ``log d``)."""
    dims = sorted(k[4] for k in fits if k[:4] == (gpu, implementation, kind, causal))
    x = np.log2(np.clip(np.asarray(d, np.float64), dims[0], dims[-1]))
    logs = np.log2(np.asarray(dims, np.float64))
    e = np.interp(x, logs, [fits[(gpu, implementation, kind, causal, k)][0] for k in dims])
    c = np.interp(x, logs, [fits[(gpu, implementation, kind, causal, k)][1] for k in dims])
    return e * s / (s + c)


def kernel_tflops(gpu: str, implementation: str, kind: str, causal: bool, d, s, fits=None):
    """TFLOP/s of ``implementation`` on ``gpu`` ("H100", "A100") for one pass (``kind``:
    "forward", "backward" or "forward+backward") at head dimension ``d`` and length ``s``.

    A pass not measured with the mask is derived (see the module): a causal backward from the
    non-causal one times the forward's causal ratio; forward and backward together from the
    two passes (time ``F / forward + 2.5 F / backward``); a single pass of a kernel measured
    only forward and backward together at that curve's speed."""
    fits = FITS if fits is None else fits
    kernels = sorted({k[:2] for k in fits})
    if (gpu, implementation) not in kernels:
        raise ScheduleError(f"(gpu, implementation) must be a measured kernel, one of "
                            f"{kernels} (got {(gpu, implementation)!r})")
    one_of(kind, "kind", PASSES)
    causal = flag(causal, "causal")  # (any other value fell to the causal branch below)
    s = numbers(s, "s", strict=True)
    d = numbers(d, "d", strict=True)
    have = {k[2:4] for k in fits if k[:2] == (gpu, implementation)}
    if (kind, causal) in have:
        return _curve(fits, gpu, implementation, kind, causal, d, s)
    if kind == "forward+backward":
        forward = kernel_tflops(gpu, implementation, "forward", causal, d, s, fits)
        backward = kernel_tflops(gpu, implementation, "backward", causal, d, s, fits)
        return 3.5 / (1.0 / forward + 2.5 / backward)
    if ("forward+backward", causal) in have:  # A100: the passes measured only together
        return _curve(fits, gpu, implementation, "forward+backward", causal, d, s)
    ratio = (_curve(fits, gpu, implementation, "forward", True, d, s)
             / _curve(fits, gpu, implementation, "forward", False, d, s))
    return ratio * _curve(fits, gpu, implementation, kind, False, d, s)


def kernel_of(hardware):
    """``(gpu, implementation, peak)`` of the measured kernel ``hardware`` runs (a
    ``StackHardware``'s ``attention_kernel`` where it names one), or ``None`` (a GPU without
    one: the dense-product curve prices its attention)."""
    kernel = _own_kernel(hardware)
    chosen = getattr(hardware, "attention_kernel", "")
    if kernel is None or not chosen:
        return kernel
    return kernel[0], chosen, kernel[2]


def measured_kernels(hardware) -> list[str]:
    """The kernels measured on ``hardware``'s GPU (``with_attention_kernel`` takes them):
    none for a GPU without a measured kernel, and for one whose kernel is assumed from
    another GPU's (Blackwell's, ``ASSUMED``) that kernel alone."""
    kernel = _own_kernel(hardware)
    if kernel is None:
        return []
    if hardware.name.startswith(ASSUMED):
        return [kernel[1]]
    return sorted({k[1] for k in FITS if k[0] == kernel[0]})


def _own_kernel(hardware):
    """``KERNEL_OF``'s kernel of ``hardware``'s GPU, by name prefix, or ``None``."""
    for prefix, kernel in KERNEL_OF:
        if hardware.name.startswith(prefix):
            return kernel
    return None


def attention_efficiency(hardware, kind: str, s, d, causal: bool = True):
    """The fraction of ``hardware``'s dense bf16 peak its attention kernel reaches on a pass
    (``kind``: "forward" or "backward") over sequences of ``s`` keys with head dimension
    ``d`` (times a ``StackHardware``'s ``attention_speed``, at most the peak); ``None`` for a
    GPU without a measured kernel (``kernel_of``)."""
    one_of(kind, "kind", PASSES[:2])
    kernel = kernel_of(hardware)
    if kernel is None:
        return None
    gpu, implementation, peak = kernel
    speed = getattr(hardware, "attention_speed", 1.0)
    # (a speed up to 2 on a fast curve, FlashAttention-3's 0.81 of the peak, would pass it)
    return np.minimum(speed * 1e12 * kernel_tflops(gpu, implementation, kind, causal, d, s)
                      / peak, 1.0)
