"""Accelerators, links and the presets of both.

A ``Hardware`` carries what the per-op model (``fastpp.model.compute``) and the collectives
(``fastpp.model.comm``) read: the dense peak of each precision, the memory bandwidth, a launch
overhead per op, the matrix-product efficiency curve, and the two links.

Sources of the presets (datasheets unless said otherwise): A100-SXM4-80GB 312 TFLOP/s bf16,
2.04 TB/s HBM2e; H100-SXM5 989 / 1979 TFLOP/s bf16 / fp8, 3.35 TB/s HBM3; H200 4.8 TB/s HBM3e;
B200 2.25 / 4.5 PFLOP/s, 8 TB/s. H800-80GB: H100-SXM5's compute and memory with the
export-limited NVLink (400 GB/s both directions); its links are what DeepSeek-V3's report
(Liu et al. 2024, section 3.2.2) says its all-to-all kernels reach, about 160 GB/s over NVLink
and 50 GB/s per GPU over InfiniBand (CX7 400 Gb/s). GB200 (one Blackwell GPU of a GB200
NVL72 rack, NVIDIA's datasheet): 2.5 / 5 PFLOP/s dense bf16 / fp8, 186 GB of HBM3e at 8 TB/s,
72 GPUs in one NVLink5 domain (``gpus_per_node=72``), one 400 Gb/s rail per GPU beyond the
rack; assumed: the NVLink5 bus bandwidth of B200 and H100's efficiency curve (no GB200 table
to check them on). GB300 (one Blackwell Ultra GPU of a GB300 NVL72 rack, NVIDIA's GB300 NVL72
datasheet: 360 / 720 PFLOP/s bf16 / fp8 a rack of 72 with sparsity, "360 PF FP8 for
training" dense, so 2.5 / 5 PFLOP/s dense a GPU, the same as GB200; its gains are dense FP4
(15 against 10 PFLOP/s) and the attention's exponentials: the SFU's 10.7 against Blackwell's
5 TeraExponentials/s, NVIDIA's "2x attention-layer acceleration", which the dense peaks do
not carry), 288 GB of HBM3e at 8 TB/s, one NVLink5 domain of 72, one ConnectX-8 800 Gb/s rail
per GPU beyond the rack. B300-288GB (one GPU of a DGX B300 / HGX B300: 8 a node, NVLink5,
ConnectX-8 800 Gb/s a GPU; HGX B300's datasheet: 72 / 36 PFLOP/s fp8 / bf16 with sparsity
for 8 GPUs): B200's 2.25 / 4.5 PFLOP/s dense, 288 GB at 8 TB/s. The Grace-hosted GPUs
(GB200, GB300) reach host memory over NVLink-C2C: one Grace's link (900 GB/s both
directions) serves its superchip's two GPUs ("one Grace CPU with two Blackwell GPUs ... 900
GB/s NVLink-C2C"), and in a training run both copy at once, so each GPU gets half of each
direction, 225 GB/s (``host_bandwidth``); the others reach it over PCIe Gen5 x16 (64 GB/s a
direction, about 50 reached). Blackwell's curve is H100's, checked on the MoE rows only
(``fastpp.model.validate_moe``).

The memory bandwidths are what a streaming kernel reaches (about 85-90% of the datasheet, as
STREAM-like copies measure). The links are the bus bandwidths NCCL's all-reduce reaches
(nccl-tests ``busbw`` at large messages: about 230 GB/s on a DGX A100's NVLink3, 360 GB/s on
a DGX H100's NVLink4), and one InfiniBand rail per GPU (Selene: 8 x HDR 200 Gb/s per node;
H100 clusters: NDR 400 Gb/s) at about 90% of its line rate. The efficiency
curves' two parameters per GPU are calibrated (``fastpp.model.validate`` says on which tables).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..checks import (
    MAX_INT,
    ScheduleError,
    ScheduleTypeError,
    instance,
    known_keywords,
    number,
    numbers,
    one_of,
    positive_int,
    show,
)

GB = 1e9
PRECISIONS = ("bf16", "fp8")
# the fixed costs' fields (fitted for A100 by fastpp.model.validate_small)
HOST = ("host_layer", "host_backward", "host_microbatch", "host_step", "host_op", "handoff")


LOWEST_EFFICIENCY = 0.01  # a curve's ceiling must be above it
# the longest fixed time (a latency, an overhead, the host's time a layer) taken, in seconds:
# an hour is no hardware's, and 1e308 made a step's time overflow to inf
LONGEST = 3600.0


def _open_closed(value, name: str, upper: float, lower: float = 0.0) -> None:
    """Raise unless ``value`` is a number in ``(lower, upper]``."""
    if (isinstance(value, bool) or not isinstance(value, int | float | np.number)
            or not lower < value <= upper):  # (compared as given: float(10**400) overflows)
        raise ScheduleError(f"{name} must be a number in ({lower:g}, {upper:g}] (got "
                            f"{show(value)})")


def _rate(value, name: str) -> None:
    """Raise unless ``value`` is one finite rate of at least 1 a second: a slower one (1e-300
    bytes/s) makes a step's time overflow to inf, which plan then printed as fitting."""
    number(value, name, strict=True, lower=1.0)


@dataclass(frozen=True)
class Link:
    """A link between GPUs, as its collectives see it.

    A ring collective in one node takes the fastest of ``protocols`` that runs its message,
    ``base + steps hop + fraction bytes / bandwidth``, as NCCL's tuner picks it; without
    protocols, ``steps latency + fraction bytes / bandwidth``.

    Parameters
    ----------
    name : str
        The link's name, in messages.
    bandwidth : float
        Bus bandwidth in bytes per second: what a ring collective reaches per rank.
    latency : float
        Seconds per ring step, at most 3600 (``LONGEST``, as the protocols' latencies).
    protocols : tuple, optional
        NCCL's protocols (or algorithms) on this link as ``(base, hop, bandwidth)`` triples,
        an alpha-beta model each (NCCL's own tuning model, ``src/graph/tuning.cc``: a base
        latency, a latency per ring step, a bus bandwidth), each with an optional fourth
        number, the largest message in bytes it runs (NCCL's tuner switching to another at a
        size, as to NVLink SHARP at 2 MiB on NVLink4). At least one protocol runs every size.
        One without a hop (an in-switch one, NVLink SHARP) has an all-reduce's bandwidth: an
        all-gather or a reduce-scatter runs it slower (``fastpp.model.comm.link_time``).
    """

    name: str
    bandwidth: float
    latency: float
    protocols: tuple = ()

    def __post_init__(self):
        instance(self.name, str, "name", "string")
        _rate(self.bandwidth, f"{self.name}.bandwidth")
        number(self.latency, f"{self.name}.latency", upper=LONGEST)
        instance(self.protocols, tuple, f"{self.name}.protocols", "tuple of (base, hop, "
                 "bandwidth) triples")
        for k, triple in enumerate(self.protocols):
            if not isinstance(triple, tuple) or len(triple) not in (3, 4):
                raise ScheduleError(f"{self.name}.protocols[{k}] must be a (base, hop, "
                                    f"bandwidth) triple, or with the largest message it runs "
                                    f"(got {triple!r})")
            for part, what in zip(triple[:2], ("base", "hop"), strict=True):
                number(part, f"{self.name}.protocols[{k}] {what} latency", upper=LONGEST)
            _rate(triple[2], f"{self.name}.protocols[{k}] bandwidth")
            if len(triple) == 4:
                number(triple[3], f"{self.name}.protocols[{k}] largest message", strict=True,
                       lower=1.0)
        if self.protocols and all(len(t) == 4 for t in self.protocols):
            raise ScheduleError(f"{self.name}.protocols must run every size: one without a "
                                f"largest message (got {self.protocols!r})")


@dataclass(frozen=True)
class Hardware:
    """An accelerator and the node it sits in.

    Parameters
    ----------
    name : str
    peak_flops : float
        Dense bf16 FLOP/s (MFU is measured against it).
    memory_bytes : float
        Device memory.
    node : Link
        The intra-node link (NVLink): tensor parallelism and neighbours in one node.
    network : Link
        The inter-node link per GPU (InfiniBand).
    efficiency : float
        The fraction of the peak that the largest matrix products reach, in (0.01, 1]: the
        ceiling of the efficiency curve (``fastpp.model.compute.matmul_efficiency``).
    gpus_per_node : int
        The default search keeps tensor parallelism inside a node.
    memory_bandwidth : float
        Bytes per second a memory-bound kernel moves, >= 1 (as every rate here: a slower one
        overflows a step's time).
    op_overhead : float
        Seconds each op (a kernel) costs beyond its roofline time, in [0, 3600] (``LONGEST``,
        as every fixed time here).
    matmul_half : float
        The curve's half-saturation size in elements, > 0 and at most 65,536: each of a
        product's three dimensions ``x`` scales the efficiency by ``x / (x + matmul_half)``.
    precision : {"bf16", "fp8"}
        The matrix products' precision; its peak is ``peak_flops`` or ``fp8_flops``.
    fp8_flops : float, optional
        Dense fp8 FLOP/s (``None``: the accelerator has no fp8 tensor cores).
    fp8_current_scaling : bool
        FP8 products under Transformer Engine's per-tensor current scaling
        (``Float8CurrentScaling``, Megatron-Bridge's ``fp8_cs``): each cast first reads its
        input for the amax (``nvte_compute_amax``, ``nvte_group_compute_amax`` for an MoE
        layer's experts), then derives the scale, then casts (``fastpp.model.compute``'s
        ``CURRENT_SCALING_BYTES``). False (the presets): the scale comes out of the cast
        kernel itself, as delayed scaling's amax, MXFP8's and DeepSeek-V3's block scales do.
    split_accumulator : float
        How many times longer an FP8 product takes with the split accumulator than with
        fast accumulation, >= 1, where the products accumulate in split mode: Transformer
        Engine's FP8 recipes run the data- and weight-gradient products with
        ``use_split_accumulator=True`` (``Float8CurrentScaling``'s ``fp8_gemm_dgrad`` and
        ``fp8_gemm_wgrad``), a Hopper cuBLASLt mode that promotes the partial sums to FP32
        every few steps of the reduction; Blackwell's FP8 products have no fast mode to
        lose (Transformer Engine's ``cublaslt_grouped_gemm.cu``: "no fastAccuMode for
        sm100"). Priced where ``fp8_current_scaling`` is (``fastpp.model.compute``'s
        ``gradient_hardware``). The Hopper presets take 1.15: a torchao user measured 1.1x
        to 1.2x from fast accumulation in FP8 training (pytorch/ao issue 2377; the mode is
        Hopper's and Ada's), and the middle is taken.
    fused_grouped_mlp : bool
        The routed experts' FP8 MLP as Transformer Engine's fused grouped MLP on Blackwell
        (``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``, Megatron-Bridge's
        ``cutedsl_fused_grouped_mlp``): the first product's epilogue applies the SwiGLU and
        the routing probabilities and writes the second product's input already in MXFP8
        (``ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8``), and the second product's data-gradient
        epilogue applies the SwiGLU's backward and writes the first one's output gradient in
        MXFP8 (``BackwardGroupedMLP_CuTeGEMMDSwiGLU_MXFP8``). The activation's passes and
        those two casts are then no kernels of their own, but the epilogues still write the
        casts' row-wise and column-wise copies, and the backward's reads the saved bf16
        SwiGLU input (``fastpp.model.moe``). False (the presets): Megatron-Core's unfused
        ``TEGroupedMLP``.
    fp8_output_layer : bool
        The output layer's products in FP8 too, as Megatron's ``fp8_output_proj`` runs them
        with MXFP8 (``TELMHeadColumnParallelLinear``, 2026). False (the presets): they stay
        in bf16 under an FP8 recipe, as Megatron-Core's output layer is a
        ``tensor_parallel.ColumnParallelLinear`` outside Transformer Engine and DeepSeek-V3's
        report keeps "the output head" in its original precision (section 3.3.1).
    host_bandwidth : float
        Bytes per second one way between the GPU and host memory (activation offloading).
    host_layer : float
        Seconds the framework's CPU takes to issue one transformer layer's forward (Python,
        PyTorch's dispatcher, the kernel launches), in [0, 3600]. A stretch of work takes the longer
        of its GPU time and its CPU time (``fastpp.model.compute.host_times``).
    host_backward : float
        Likewise for one layer's backward (autograd), without a recomputed forward, in
        [0, 3600].
    host_microbatch : float
        CPU seconds per microbatch on a stage holding the embedding or the loss, beside its
        layers' (the batch's fetch and broadcast, the loss function, the schedule's
        bookkeeping), in [0, 3600].
    host_step : float
        Seconds per iteration outside the pipeline's ops on the CPU (the optimizer's launches,
        the gradient norm and loss-scale checks, the iteration's bookkeeping), in [0, 3600].
    host_op : float
        CPU seconds of one more op a layer issues beyond the fused layer's ``host_layer`` (PyTorch's
        softmax path where Megatron's fused kernel refuses the shape:
        ``fastpp.model.compute.eager_ops``), in [0, 3600].
    handoff : float
        Fixed seconds each op with blocking hand-offs holds its device beyond their transfer,
        in [0, 3600]: Megatron synchronizes the device after each batched send and receive, and the
        GPU idles until the CPU issues again (not a latency on the pipeline's chain).
    fp8_padding : bool
        Each local expert's tokens padded to the FP8 products' row alignment by a copy of
        their own, and the padding stripped from the output by another, where nothing padded
        them before: Megatron-Core's ``TEGroupedMLP.forward`` calls Transformer Engine's
        ``Fp8Padding`` and ``Fp8Unpadding`` under any FP8 recipe, which copy the received
        tokens (``fused_multi_row_padding``, ``fused_multi_row_unpadding``; the backward
        copies their gradients the other way) unless every expert's count is already a
        multiple of 16, or 32 for MXFP8; force-balanced routing draws the counts at random.
        The all-to-all dispatcher's permutation does not pad unless
        ``moe_router_padding_for_fp8`` is set, which Megatron-Bridge's Qwen3 recipes turn off;
        HybridEP pads inside its own permutation under any FP8 recipe (Megatron-LM at
        ebfa13852f, ``token_dispatcher.py``'s ``_HybridEPManager.dispatch``; its DeepSeek-V3
        GB200 guide, section 2.5). Priced as two more passes over the received tokens each way
        (``fastpp.model.moe``'s ``expert_times``), in FP8 only. False (the presets).
    floor : str
        A preset (``HARDWARE``) whose bf16 products this GPU runs none slower than, at any
        shape: its curve is a floor under this one (``compute.matmul_efficiency``; none where
        this GPU's bf16 peak is below the preset's, never past ``efficiency``). Hopper's
        and Blackwell's presets take ``"A100-80GB"``: their curve, fitted on large models'
        products alone, prices a thin one (an expert's few rows, a tensor-parallel slice)
        below an A100's. "" (none).
    """

    name: str
    peak_flops: float
    memory_bytes: float
    node: Link
    network: Link
    efficiency: float = 0.8
    gpus_per_node: int = 8
    memory_bandwidth: float = 2.0e12
    op_overhead: float = 4e-6
    matmul_half: float = 128.0
    precision: str = "bf16"
    fp8_flops: float | None = None
    fp8_current_scaling: bool = False
    split_accumulator: float = 1.0
    fused_grouped_mlp: bool = False
    fp8_output_layer: bool = False
    host_bandwidth: float = 50e9
    host_layer: float = 0.0
    host_backward: float = 0.0
    host_microbatch: float = 0.0
    host_step: float = 0.0
    host_op: float = 0.0
    handoff: float = 0.0
    fp8_padding: bool = False
    floor: str = ""

    def __post_init__(self):
        instance(self.name, str, "name", "string")
        instance(self.node, Link, "node", "fastpp.model.Link")
        instance(self.network, Link, "network", "fastpp.model.Link")
        _rate(self.peak_flops, "peak_flops")
        number(self.memory_bytes, "memory_bytes", strict=True)
        # (a curve below 1% of the peak is no GPU's; near 0 it overflowed a step's time)
        _open_closed(self.efficiency, "efficiency", 1.0, lower=LOWEST_EFFICIENCY)
        positive_int(self.gpus_per_node, "gpus_per_node", MAX_INT)
        _rate(self.memory_bandwidth, "memory_bandwidth")
        number(self.op_overhead, "op_overhead", upper=LONGEST)
        _open_closed(self.matmul_half, "matmul_half", 65536.0)
        one_of(self.precision, "precision", PRECISIONS)
        one_of(self.fp8_current_scaling, "fp8_current_scaling", (False, True))
        number(self.split_accumulator, "split_accumulator")
        one_of(self.fused_grouped_mlp, "fused_grouped_mlp", (False, True))
        one_of(self.fp8_output_layer, "fp8_output_layer", (False, True))
        one_of(self.fp8_padding, "fp8_padding", (False, True))
        if self.floor != "":  # (the presets' own are checked once HARDWARE is made)
            presets = globals().get("HARDWARE", {self.floor: None})
            if self.floor not in presets:
                raise ScheduleError(f"floor must be '' or a preset of HARDWARE, one of "
                                    f"{sorted(presets)} (got {self.floor!r})")
        if not self.split_accumulator >= 1.0:
            raise ScheduleError(f"split_accumulator must be >= 1 (got "
                                f"{self.split_accumulator!r})")
        # the gradient products' ceiling under current scaling (compute.gradient_hardware)
        if self.fp8_current_scaling and not (self.efficiency / self.split_accumulator
                                             > LOWEST_EFFICIENCY):
            raise ScheduleError(f"efficiency / split_accumulator must be above "
                                f"{LOWEST_EFFICIENCY:g} with fp8_current_scaling (got "
                                f"{self.efficiency!r} / {self.split_accumulator!r})")
        _rate(self.host_bandwidth, "host_bandwidth")
        for name in HOST:
            number(getattr(self, name), name, upper=LONGEST)
        if self.fp8_flops is not None:
            _rate(self.fp8_flops, "fp8_flops")
        elif self.precision == "fp8":
            raise ScheduleError(f"precision='fp8' needs fp8_flops, the GPU's FP8 peak, which "
                                f"{self.name} lacks (a GPU without FP8 products, or none "
                                f"given: got fp8_flops=None)")

    @property
    def peak(self) -> float:
        """The matrix products' peak FLOP/s at ``precision``."""
        return float(self.fp8_flops if self.precision == "fp8" else self.peak_flops)

    def seconds(self, flops):
        """Time of ``flops`` at ``efficiency`` of the peak (products too large to lose to
        their shape).

        Parameters
        ----------
        flops : float or array_like
            >= 0.

        Returns
        -------
        ndarray
            Seconds.
        """
        return numbers(flops, "flops") / (self.peak * self.efficiency)

    def with_efficiency(self, efficiency: float) -> Hardware:
        """The same hardware with another ceiling of the efficiency curve.

        Parameters
        ----------
        efficiency : float

        Returns
        -------
        Hardware
        """
        return replace(self, efficiency=efficiency)

    def with_precision(self, precision: str) -> Hardware:
        """The same hardware with its matrix products in another precision.

        Parameters
        ----------
        precision : str
            ``"bf16"`` or ``"fp8"``.

        Returns
        -------
        Hardware
        """
        return replace(self, precision=precision)


# NCCL's protocols on NVLink3 (LL, LL128, Simple) from nccl-tests' all-reduce on 8 A100s
# (small_model_overheads.csv, 64 B to 16 MiB). Each protocol's hop is NCCL's own per-step
# latency on NVLink rings (src/graph/tuning.cc: 0.47, 1.9, 3.4 us); its base and bandwidth are
# fitted (validate_small.fit_protocols) on the sizes where NCCL picks it: <= 1 MiB, 2-4 MiB,
# 8-16 MiB (1.4% mean error; Simple's 248 GB/s is 5% above the 235 GB/s the same run reaches
# at 8 GiB)
NVLINK3_PROTOCOLS = ((25.3e-6, 0.47e-6, 38.0e9), (63.7e-6, 1.9e-6, 166e9),
                     (78.9e-6, 3.4e-6, 248e9))

NVLINK3_BUS = 230e9  # NVLink3's bus bandwidth: the Link below

# NCCL on NVLink4 (H100, H200) from nccl-tests' all-reduce on 8 H200s (small_model_overheads.csv,
# NCCL 2.30.7, 32 KiB to 16 MiB): an LL ring up to 1 MiB (NCCL's hop since 2.18, 0.6 us; base
# and bandwidth fitted), then NVLink SHARP, an in-switch reduction (no per-step latency; base
# and bandwidth fitted on 2-16 MiB), both by validate_small.fit_protocols (NVLINK4_RANGES);
# past the sizes measured (NVLink SHARP's bus bandwidth still rising at 16 MiB) the plain ring
# at the link's 360 GB/s and NCCL's Simple base, which takes over from about 57 MB
NVLINK4_BUS = 360e9  # NVLink4's bus bandwidth (assumed): the Link below
# the plain ring's base: NCCL's for a Simple ring (tuning.cc's baseLat, 2.17-2.30.7), which
# every call pays (at none, 2 H100s all-gathered 64 B in 5 us, under the LL ring's 9.6 us)
SIMPLE_BASE = 8.4e-6
NVLINK4_PROTOCOLS = ((9.01e-6, 0.6e-6, 284.8e9, 2.0**20), (28.56e-6, 0.0, 305.1e9),
                     (SIMPLE_BASE, 5e-6, NVLINK4_BUS))


def nvlink_protocols(bandwidth: float, latency: float = 5e-6) -> tuple:
    """NCCL's protocols on an NVLink with no all-reduce table of its own (NVLink5; H800's
    NVLink4 with fewer links): NVLink4's as measured (``NVLINK4_PROTOCOLS``: its LL ring up to
    1 MiB and NVLink SHARP, their latencies NCCL's and the switch's, not the link's), their
    bandwidths scaled by the link's bus bandwidth over NVLink4's 360 GB/s, and the plain ring
    (NCCL's Simple base, ``latency`` a step, the link's bandwidth) for the largest messages.
    Until 6 December 2026 they were NVLink3's LL latencies (measured with an older NCCL) and
    the plain ring, as NVLink4's were: carried to NVLink4's measured ones, no table's MAPE
    moved by 0.01 point.
    """
    (ll, ll_hop, ll_rate, largest), (sharp, sharp_hop, sharp_rate), _ = NVLINK4_PROTOCOLS
    scale = bandwidth / NVLINK4_BUS
    return ((ll, ll_hop, ll_rate * scale, largest), (sharp, sharp_hop, sharp_rate * scale),
            (SIMPLE_BASE, latency, bandwidth))


LINKS = {link.name: link for link in (
    Link("NVLink3", NVLINK3_BUS, 5e-6, NVLINK3_PROTOCOLS),  # A100 (600 GB/s both ways)
    # H100, H200 (900 GB/s both directions): busbw ~360 GB/s, and NCCL's protocols measured
    Link("NVLink4", NVLINK4_BUS, 5e-6, NVLINK4_PROTOCOLS),
    # B200 (1.8 TB/s both directions): busbw ~720 GB/s
    Link("NVLink5", 720e9, 5e-6, nvlink_protocols(720e9)),
    # H800 (400 GB/s both directions): DeepSeek's ~160 GB/s
    Link("NVLink4-H800", 160e9, 5e-6, nvlink_protocols(160e9)),
    Link("IB-200G", 22.5e9, 8e-6),  # HDR 200 Gb/s per GPU (Selene), 90% of line rate
    Link("IB-400G", 45e9, 8e-6),  # NDR 400 Gb/s per GPU, 90% of line rate
    Link("IB-400G-H800", 50e9, 8e-6),  # CX7 400 Gb/s per GPU as DeepSeek-V3 reports it
    Link("IB-800G", 90e9, 8e-6),  # ConnectX-8 800 Gb/s per GPU (B300, GB300), 90% of line rate
)}

# The curves (efficiency, matmul_half) are fitted by fastpp.model.validate.calibrate: A100's on
# Korthikanti et al.'s layer table alone, H100's on the odd rows of the Megatron-Core table; the
# other tables are the checks (docs/fidelity.md, "How close to real runs"); H100's refit when
# FlashAttention's core left this curve for the measured kernel (fastpp.model.attention).
# H200 shares H100's compute, so its curve; B200's is H100's too, checked only by
# NeMo's Llama 3 8B FP8 long-context rows (fastpp.model.validate_long: +15% at 8K, where the
# products dominate).
A100_CURVE = {"efficiency": 0.76, "matmul_half": 64.0}
# A100's fixed costs, fitted by fastpp.model.validate_small.calibrate_overheads on the even
# rows of vtrain_single_node_a.csv (Megatron on a DGX A100, vTrain's host); its odd rows check
# them, the descent starting from validate_small.VTRAIN_START (the previous fit, from a
# Nelder-Mead optimum; from zero it stops at a worse fixed point, 6.3% against 6.1%). The
# hand-off's is not fitted (OVERHEAD_GRID): fitted with the others (the curve at e = 0.74) it
# took 0.3 ms and gained the calibration rows 0.1 point, under the half point a new constant
# must earn. The other presets have none: no table of theirs is launch- or latency-bound.
A100_OVERHEADS = {"host_layer": 1.65e-3, "host_backward": 0.05e-3, "host_microbatch": 3.0e-3,
                  "host_step": 2.0e-3, "host_op": 0.12e-3, "handoff": 0.0}
# a Hopper or Blackwell product no slower than an A100's (Hardware.floor): H100's curve
# prices 4096 x 4096 x 128 at 62 TFLOP/s, an A100 at 134 (a review found MoE steps on H100
# priced up to 1.49 times an A100's, 7 December 2026)
H100_CURVE = {"efficiency": 0.94, "matmul_half": 1024.0}
NEWER = {**H100_CURVE, "floor": "A100-80GB"}  # the presets on H100's curve
# Hopper's FP8 products in split accumulation (Hardware.split_accumulator): pytorch/ao issue
# 2377, "enabling fast accumulation can lead to a 1.1x to 1.2x speedup"; the middle
HOPPER_SPLIT_ACCUMULATOR = 1.15
HARDWARE = {hw.name: hw for hw in (
    Hardware("A100-80GB", 312e12, 80 * GB, LINKS["NVLink3"], LINKS["IB-200G"],
             memory_bandwidth=1.75e12, **A100_CURVE, **A100_OVERHEADS),
    Hardware("H100-80GB", 989e12, 80 * GB, LINKS["NVLink4"], LINKS["IB-400G"],
             memory_bandwidth=2.9e12, fp8_flops=1979e12,
             split_accumulator=HOPPER_SPLIT_ACCUMULATOR, **NEWER),
    Hardware("H200-141GB", 989e12, 141 * GB, LINKS["NVLink4"], LINKS["IB-400G"],
             memory_bandwidth=4.2e12, fp8_flops=1979e12,
             split_accumulator=HOPPER_SPLIT_ACCUMULATOR, **NEWER),
    Hardware("B200-180GB", 2250e12, 180 * GB, LINKS["NVLink5"], LINKS["IB-400G"],
             memory_bandwidth=7.0e12, fp8_flops=4500e12, **NEWER),
    Hardware("H800-80GB", 989e12, 80 * GB, LINKS["NVLink4-H800"], LINKS["IB-400G-H800"],
             memory_bandwidth=2.9e12, fp8_flops=1979e12,
             split_accumulator=HOPPER_SPLIT_ACCUMULATOR, **NEWER),
    Hardware("GB200", 2500e12, 186 * GB, LINKS["NVLink5"], LINKS["IB-400G"], gpus_per_node=72,
             memory_bandwidth=7.0e12, fp8_flops=5000e12, host_bandwidth=225e9, **NEWER),
    Hardware("GB300", 2500e12, 288 * GB, LINKS["NVLink5"], LINKS["IB-800G"], gpus_per_node=72,
             memory_bandwidth=7.0e12, fp8_flops=5000e12, host_bandwidth=225e9, **NEWER),
    Hardware("B300-288GB", 2250e12, 288 * GB, LINKS["NVLink5"], LINKS["IB-800G"],
             memory_bandwidth=7.0e12, fp8_flops=4500e12, **NEWER),
)}
assert all(hw.floor in ("", *HARDWARE) for hw in HARDWARE.values())


def preset(table: dict, value, what: str):
    """``value`` itself if it is of the presets' type, or the preset it names; an unknown name
    lists the presets, another type is a ``ScheduleTypeError``."""
    kind = type(next(iter(table.values())))
    if isinstance(value, kind):
        return value
    if not isinstance(value, str):
        raise ScheduleTypeError(f"{what} must be a fastpp.model.{kind.__name__} or a preset name "
                                f"(got {type(value).__name__})")
    try:
        return table[value]
    except KeyError:
        raise ScheduleError(f"{what} must be one of {sorted(table)} or a {what} object (got "
                            f"{value!r})") from None


# a misspelt keyword named, not a bare TypeError
Link.__init__ = known_keywords("Link")(Link.__init__)
Hardware.__init__ = known_keywords("Hardware")(Hardware.__init__)
