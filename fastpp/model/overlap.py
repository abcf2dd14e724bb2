"""The overlapped forward-and-backward pair: one microbatch's compute beside the other's
all-to-alls (DeepSeek-V3's DualPipe, DualPipeV, Megatron's combined 1F1B)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


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
