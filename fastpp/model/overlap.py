"""The overlapped forward-and-backward pair: one microbatch's compute beside the other's
all-to-alls (DeepSeek-V3's DualPipe, DualPipeV, Megatron's combined 1F1B).

A pair runs one layer of microbatch A's forward and one layer of microbatch B's backward in
four slots (DeepSeek-V3 report, Figure 4; ``deepseek_v3_dualpipe_pair.csv``), in this order
on two streams, one of compute and one of communication:

====  ==========================  ===============
slot  compute                     communication
====  ==========================  ===============
1     attention (F)               combine (B)
2     MLP input grad (B)          dispatch (F)
3     MLP weight grad + MLP (F)   dispatch (B)
4     attention input + weight    combine (F)
====  ==========================  ===============

Each stream runs its parts in order, and a part waits for the one before it of its own
microbatch (Megatron-LM's ``TransformerLayerSchedulePlan.run``: one event a microbatch, which
every node waits for and records, but the deferred weight grad, which records none): so A's
dispatch starts when its attention ends, B's dispatch grad when its MLP input grad ends, and
a stream waits only for what it needs, not for a slot's end (``pair_time``). Priced as four
slots, each the longer of its compute and its communication, until 7 December 2026: 5% over
DeepSeek's measured pair from its own slot table, 0.7% so (a review).

While an all-to-all runs, its kernels hold ``comm_sms`` of the GPU's ``sms`` streaming
multiprocessors (DeepSeek: 20 of an H800's 132), so the compute beside it runs on the rest,
``sms / (sms - comm_sms)`` times slower: the layer's compute, where the layer has any
all-to-all. Without the overlap each all-to-all sits inside its own F or B, in series with
the compute (``serial_time``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    flag,
    known_keywords,
    numbers,
    one_of,
    positive_int,
)
from ..generators.registry import SCHEDULES, get_spec
from .transformer import RECOMPUTE

# DeepSeek-V3 report section 3.2.2: 20 of the H800's 132 SMs run the all-to-alls
COMM_SMS, SMS = 20, 132
SLOTS = ("attn(F) | combine(B)", "mlp(B) | dispatch(F)", "mlp(W)+mlp(F) | dispatch(B)",
         "attn(B)+attn(W) | combine(F)")


class LayerParts(NamedTuple):
    """One layer's parts for one microbatch on one GPU, in seconds (arrays broadcast).

    The forward runs attention, the dispatch all-to-all, the MLP (routed and shared experts)
    and the combine all-to-all; the backward runs them in reverse, each compute part split
    into its input grad (``_i``) and weight grad (``_w``), as in SCHEDULES.md's ``I`` and ``W``.
    """

    attention_f: np.ndarray
    attention_i: np.ndarray
    attention_w: np.ndarray
    mlp_f: np.ndarray
    mlp_i: np.ndarray
    mlp_w: np.ndarray
    dispatch_f: np.ndarray
    combine_f: np.ndarray
    dispatch_b: np.ndarray
    combine_b: np.ndarray


def _seconds(parts) -> LayerParts:
    """``parts`` as float64 arrays, if it is a ``LayerParts`` of finite times >= 0."""
    if not isinstance(parts, LayerParts):
        raise ScheduleTypeError(f"parts must be a LayerParts (fastpp.model.moe.layer_parts) "
                                f"(got {type(parts).__name__})")
    return LayerParts(*(numbers(v, f"parts.{k}") for k, v in zip(parts._fields, parts,
                                                                   strict=True)))


def slots(parts: LayerParts) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The four slots' compute and communication seconds (``SLOTS``' order), unslowed: the
    layout of DeepSeek's published slot table (``pair_time`` runs the parts on two streams)."""
    x = _seconds(parts)
    compute = [x.attention_f, x.mlp_i, x.mlp_w + x.mlp_f, x.attention_i + x.attention_w]
    communication = [x.combine_b, x.dispatch_f, x.dispatch_b, x.combine_f]
    return compute, communication


def pair_time(parts: LayerParts, *, comm_sms: int = COMM_SMS, sms: int = SMS) -> np.ndarray:
    """Seconds of one layer of an overlapped pair: its parts in the slots' order on a compute
    and a communication stream, each part after the one before it on its stream and the one
    before it of its microbatch (the module docstring), the compute slowed.

    Parameters
    ----------
    parts : LayerParts
        The layer's compute parts, timed on the whole GPU, and its all-to-alls.
    comm_sms, sms : int
        SMs the all-to-alls hold, of the GPU's ``sms``: a layer with any all-to-all runs all
        of its compute ``sms / (sms - comm_sms)`` times slower (a layer without, at full
        speed). An assumption: the streams overlap throughout an MoE layer's pair, whose
        four slots each hold an all-to-all; until 7 December 2026 it was slot by slot, which
        agrees wherever every slot has one. ``comm_sms=0`` takes the compute times as
        already measured beside the communication.

    Raises
    ------
    ScheduleError
        If ``comm_sms`` is not in ``0..sms-1``.
    """
    sms = positive_int(sms, "sms")
    if isinstance(comm_sms, bool) or not isinstance(comm_sms, int | np.integer) \
            or not 0 <= comm_sms < sms:
        raise ScheduleError(f"comm_sms must be an integer in 0..{sms - 1} (got {comm_sms!r})")
    x = _seconds(parts)
    k = np.where(x.dispatch_f + x.combine_f + x.dispatch_b + x.combine_b > 0,
                 sms / (sms - comm_sms), 1.0)
    # each stream's clock, and when each microbatch's last part ended (A forward, B backward)
    comm = back = x.combine_b
    comp = front = x.attention_f * k
    comp = back = np.maximum(comp, back) + x.mlp_i * k
    comm = front = np.maximum(comm, front) + x.dispatch_f
    comp = comp + x.mlp_w * k  # (the deferred weight grad: no event)
    comm = back = np.maximum(comm, back) + x.dispatch_b
    comp = front = np.maximum(comp, front) + x.mlp_f * k
    comm = np.maximum(comm, front) + x.combine_f
    comp = np.maximum(comp, back) + (x.attention_i + x.attention_w) * k
    return np.maximum(comp, comm)


def serial_time(parts: LayerParts) -> np.ndarray:
    """Seconds of one layer's forward plus its backward without overlap: every part in
    series (the all-to-alls inside F and B, the compute on the whole GPU)."""
    return sum(_seconds(parts))


def saving(parts: LayerParts, *, comm_sms: int = COMM_SMS, sms: int = SMS) -> np.ndarray:
    """``serial_time - pair_time``: what the overlap saves per layer (negative when the SMs
    it reserves cost more than the communication it hides)."""
    return serial_time(parts) - pair_time(parts, comm_sms=comm_sms, sms=sms)


def expert_overlap(name: str) -> bool:
    """Whether the registered schedule ``name`` is Megatron's EP all-to-all overlap itself
    (``ScheduleSpec.expert_overlap``): its rules hold whether or not the overlap is priced."""
    spec = SCHEDULES.get(name)
    return spec is not None and spec.expert_overlap


@known_keywords("overlap_reason")
def overlap_reason(name: str, pairs: bool, recompute: str, cp: int = 1, ep: int = 2,
                   dispatcher: str = "alltoall") -> str:
    """Why the pair overlap cannot run on a schedule (``""`` if it can): ``pairs`` says
    whether the schedule has overlapped pairs; a schedule that is Megatron's overlap itself
    (``expert_overlap``, e.g. ``"combined-1f1b"``) has its rules whether or not the overlap
    is priced.

    Parameters
    ----------
    name : str
        The schedule's name.
    pairs : bool
        Whether it runs overlapped pairs (``ScheduleSpec.pairs``).
    recompute : str
        One of ``RECOMPUTE``.
    cp, ep : int
        Context- and expert-parallel degrees.
    dispatcher : str
        The token dispatcher (``fastpp.model.moe.DISPATCHERS``).

    Returns
    -------
    str
        The reason, or ``""``.

    Raises
    ------
    ScheduleError
        If ``name`` is no registered schedule or an argument is not of its kind (a reason
        is returned, never raised).
    """
    get_spec(name, "name")  # (an unknown name is refused, not told the overlap can run)
    flag(pairs, "pairs")
    one_of(recompute, "recompute", RECOMPUTE)
    one_of(dispatcher, "dispatcher", ("alltoall", "allgather", "flex"))  # (moe.DISPATCHERS)
    positive_int(cp, "cp")
    positive_int(ep, "ep")
    if not pairs:
        paired = [k for k, spec in SCHEDULES.items() if spec.pairs]
        return (f"overlap needs a schedule with overlapped forward-and-backward pairs, one of "
                f"{paired} (got {name!r})")
    if recompute == "full":
        return (f"overlap cannot run with recompute='full' (the pair needs the forward's "
                f"activations; Megatron refuses it too) (got schedule {name!r})")
    if expert_overlap(name) and ep == 1:
        return (f"{name!r} needs expert parallelism: Megatron's EP overlap asserts "
                "expert_model_parallel_size > 1 (got ep=1)")
    if expert_overlap(name) and dispatcher == "allgather":
        return (f"{name!r} needs the alltoall or flex dispatcher: Megatron's EP overlap "
                f"asserts moe_token_dispatcher_type in (alltoall, flex) (got "
                f"dispatcher='allgather')")
    if cp > 1:
        # not modelled: the pair's parts are priced for whole sequences (Megatron advises
        # against CP with its EP overlap on Hopper as well)
        return f"overlap is not modelled with context parallelism (got cp={cp})"
    return ""
