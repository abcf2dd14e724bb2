"""Real costs: a transformer on real hardware, in seconds and bytes.

Per layer, the Zero Bubble paper's Table 1 (GPT-style layer: attention plus a 4h MLP, half
precision, no recomputation), with ``s`` the sequence length, ``b`` the microbatch size, ``h``
the hidden size and ``a`` the heads, in FLOPs:

- forward ``F = sbh(24h + 4s)``, input-grad backward ``sbh(24h + 8s)``, weight grad
  ``W = 24sbh^2``. These are FLOPs, not multiply-adds: ``24sbh^2`` is the familiar
  ``2 x parameters x tokens`` of a layer's ``12h^2`` parameters (Megatron counts the forward
  the same way, ``24bsh^2 + 4bs^2h``);
- activations ``M_B = sb(34h + 5as)`` bytes, of which ``M_W = 32sbh`` live until ``W``.

The embedding sits on the first stage of each route (its activation ``2sbh`` bytes), the
output layer and the loss on the last (``2sbhv`` FLOPs each for the forward, the input grad
and the weight grad; the logits kept in fp32, ``4sbv`` bytes). A device holds
parameters, gradients and mixed-precision Adam states for its layers: 2 bytes of half weights,
2 of half gradients and 12 of fp32 master weights and moments per parameter (16 bytes), the
12 divided by ``zero_shards`` when ZeRO-1 shards them over data-parallel replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .costs import Costs
from .generators.registry import SCHEDULES, build_schedule
from .schedule import Schedule, ScheduleError
from .simulate import Result, simulate

GB = 1e9


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer and one microbatch's shape.

    Parameters
    ----------
    layers, hidden, heads : int
        Depth ``L``, hidden size ``h``, attention heads ``a``.
    seq : int
        Sequence length ``s``.
    microbatch : int
        Sequences per microbatch ``b``.
    vocab : int
        Vocabulary size ``v`` (embedding and output layer, untied).
    dtype_bytes : int
        Bytes per activation element (2 for bf16/fp16).
    split : tuple of int, optional
        Layers of each model chunk, in model order (default: as even as possible, any remainder
        on the middle chunks, away from the embedding and the output layer).
    flash_attention : bool
        Attention scores are not stored (FlashAttention): ``M_B = 34sbh`` per layer instead of
        the paper's ``sb(34h + 5as)``.
    """

    layers: int
    hidden: int
    heads: int
    seq: int
    microbatch: int = 1
    vocab: int = 32000
    dtype_bytes: int = 2
    split: tuple[int, ...] | None = None
    flash_attention: bool = False

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "seq", "microbatch", "vocab", "dtype_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ScheduleError(f"{name} must be a positive integer (got {name}={value!r})")

    # -- per layer ------------------------------------------------------------------------

    @property
    def _sbh(self) -> float:
        return float(self.seq * self.microbatch * self.hidden)

    def layer_flops(self) -> tuple[float, float, float]:
        """FLOPs of one layer's forward, input-grad backward and weight grad."""
        h, s = self.hidden, self.seq
        return self._sbh * (24 * h + 4 * s), self._sbh * (24 * h + 8 * s), self._sbh * 24 * h

    def layer_activation_bytes(self) -> tuple[float, float]:
        """``(M_B, M_W)`` of one layer in bytes."""
        s, b, h, a = self.seq, self.microbatch, self.hidden, self.heads
        scores = 0 if self.flash_attention else 5 * a * s
        return float(s * b * (34 * h + scores)), float(32 * s * b * h)

    def layer_params(self) -> float:
        """Parameters of one layer: ``12h^2 + 13h``."""
        return 12.0 * self.hidden**2 + 13.0 * self.hidden

    def message_bytes(self) -> float:
        """Bytes of one hand-off between stages: an activation ``sbh`` or its gradient."""
        return self._sbh * self.dtype_bytes

    # -- per stage --------------------------------------------------------------------------

    def chunk_layers(self, chunks: int) -> np.ndarray:
        """Layers of each of ``chunks`` model chunks."""
        if self.split is not None:
            split = np.asarray(self.split, dtype=np.int64)
            if split.shape != (chunks,) or split.min() < 0 or split.sum() != self.layers:
                raise ScheduleError(f"split must give {chunks} chunks non-negative layer counts "
                                    f"that add up to layers={self.layers} (got {self.split})")
            return split
        if chunks > self.layers:
            raise ScheduleError(f"layers must be at least the model chunks {chunks} (got "
                                f"layers={self.layers})")
        base, extra = divmod(self.layers, chunks)
        counts = np.full(chunks, base)
        middle = np.argsort(np.abs(np.arange(chunks) - (chunks - 1) / 2), kind="stable")
        counts[middle[:extra]] += 1
        return counts


@dataclass(frozen=True)
class Hardware:
    """An accelerator: dense half-precision peak, the fraction of it reached, memory."""

    name: str
    peak_flops: float
    memory_bytes: float
    efficiency: float = 0.5

    def seconds(self, flops):
        """Time of ``flops`` at ``efficiency`` of the peak."""
        return np.asarray(flops, dtype=np.float64) / (self.peak_flops * self.efficiency)


@dataclass(frozen=True)
class Link:
    """A link between neighbouring pipeline stages."""

    name: str
    bandwidth: float  # bytes per second, one direction
    latency: float  # seconds


HARDWARE = {hw.name: hw for hw in (
    Hardware("A100-80GB", 312e12, 80 * GB),
    Hardware("H100-80GB", 989e12, 80 * GB),
    Hardware("H200-141GB", 989e12, 141 * GB),
)}
LINKS = {link.name: link for link in (
    Link("NVLink3", 300e9, 3e-6),  # A100: 600 GB/s both directions
    Link("NVLink4", 450e9, 3e-6),  # H100, H200: 900 GB/s both directions
    Link("IB-400G", 50e9, 5e-6),  # 400 Gb/s InfiniBand
)}


def _stage_chunks(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per virtual stage: its model chunk, and whether it starts or ends a route."""
    s = np.arange(schedule.V)
    starts = np.isin(s, schedule.route_first)
    ends = np.isin(s, schedule.route_last)
    # a two-direction schedule runs a second copy of the same chunks from stage p on
    second_copy = (s >= schedule.p) & bool(np.any(schedule.route_first == schedule.p))
    return np.where(second_copy, s - schedule.p, s), starts, ends


def transformer_costs(model: Transformer, schedule: Schedule, hardware: Hardware,
                      link: Link) -> Costs:
    """The ``Costs`` of running ``model`` on ``schedule`` with this hardware and link.

    Times in seconds, activation memory in bytes (``Result.peak_activations`` is then in
    bytes), hand-offs of ``latency + message_bytes / bandwidth``, ``gamma = M_W / M_B`` of
    each stage.
    """
    chunk, starts, ends = _stage_chunks(schedule)
    layers = model.chunk_layers(int(chunk.max()) + 1)[chunk].astype(np.float64)
    f_l, i_l, w_l = model.layer_flops()
    m_b, m_w = model.layer_activation_bytes()
    s, b, h, v = model.seq, model.microbatch, model.hidden, model.vocab
    out = 2.0 * s * b * h * v * ends  # output layer: forward, input grad, weight grad alike
    forward = layers * f_l + out
    backward = layers * (i_l + w_l) + 2 * out
    weight = layers * w_l + out
    act = layers * m_b + starts * (2.0 * s * b * h) + ends * (4.0 * s * b * v)
    gamma = np.divide(layers * m_w, act, out=np.zeros_like(act), where=act > 0)
    m = schedule.m  # Costs take per-stage times in units of a plain pipeline's device
    return Costs(f=hardware.seconds(forward) * m, b=hardware.seconds(backward) * m,
                 w=hardware.seconds(weight) * m, comm=link.latency, gamma=gamma,
                 act=np.maximum(act, 1.0) * m, bandwidth=link.bandwidth,
                 message_bytes=model.message_bytes())


def static_bytes(model: Transformer, schedule: Schedule, zero_shards: int = 1) -> np.ndarray:
    """Per device: parameters, gradients and optimizer states in bytes (see the module)."""
    chunk, starts, ends = _stage_chunks(schedule)
    layers = model.chunk_layers(int(chunk.max()) + 1)[chunk]
    params = (layers * model.layer_params() + (starts + ends) * model.hidden * model.vocab)
    per_param = 4.0 + 12.0 / zero_shards
    return np.bincount(schedule.stage_to_device, weights=params * per_param,
                       minlength=schedule.p)


def model_sweep(model: Transformer, hardware: Hardware, link: Link, p, n, m=(1, 2),
                schedules=None, capacity: float | None = None, zero_shards: int = 1):
    """Simulate ``model`` under every valid ``(schedule, p, n, m)`` with exact per-stage costs.

    Parameters
    ----------
    model, hardware, link :
        What runs where.
    p, n, m : int or list of int
        Devices, microbatches, chunks per device.
    schedules : list of str, optional
        Registered names (default: every training schedule).
    capacity : float, optional
        Bytes per device (default: the hardware's memory).
    zero_shards : int
        Data-parallel replicas sharing the optimizer states (ZeRO-1).

    Returns
    -------
    pandas.DataFrame
        One row per point, fastest first: ``makespan`` (s), ``samples_per_s``,
        ``tokens_per_s``, ``bubble_ratio``, ``activation_gb``, ``static_gb`` and ``total_gb``
        of the fullest device, ``fits``, and a ``reason`` for points that do not fit.
    """
    import pandas as pd

    names = schedules or [k for k, spec in SCHEDULES.items() if not spec.forward_only]
    capacity = hardware.memory_bytes if capacity is None else capacity
    rows = []
    for name in names:
        spec = SCHEDULES[name]
        for pp in np.atleast_1d(p):
            for nn in np.atleast_1d(n):
                for mm in np.atleast_1d(m):
                    if spec.reasons(pp, nn, mm, pp)[0]:
                        continue
                    sched = build_schedule(name, int(pp), int(nn), int(mm))
                    try:
                        costs = transformer_costs(model, sched, hardware, link)
                    except ScheduleError:  # more chunks than layers
                        continue
                    rows.append(_evaluate(simulate(sched, costs), model, zero_shards,
                                          capacity))
    df = pd.DataFrame(rows)
    return df.sort_values(["fits", "tokens_per_s"], ascending=[False, False],
                          kind="stable").reset_index(drop=True)


def _evaluate(res: Result, model: Transformer, zero_shards: int, capacity: float) -> dict:
    sched = res.schedule
    static = static_bytes(model, sched, zero_shards)
    total = static + res.peak_activations
    worst = int(np.argmax(total))
    fits = bool(total[worst] <= capacity)
    samples = sched.n * model.microbatch / res.makespan
    return {"schedule": sched.name, "p": sched.p, "n": sched.n, "m": sched.m,
            "makespan": res.makespan, "samples_per_s": samples,
            "tokens_per_s": samples * model.seq, "bubble_ratio": res.bubble_ratio,
            "activation_gb": res.peak_activations.max() / GB, "static_gb": static.max() / GB,
            "total_gb": total[worst] / GB, "fits": fits,
            "reason": "" if fits else (f"device {worst} needs {total[worst] / GB:.1f} GB > "
                                       f"capacity {capacity / GB:.0f} GB")}
