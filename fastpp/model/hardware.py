"""Accelerators, links and the presets of both."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..checks import ScheduleError, numbers, positive_int

GB = 1e9


@dataclass(frozen=True)
class Link:
    """A link: bandwidth in bytes per second (one direction) and latency in seconds."""

    name: str
    bandwidth: float
    latency: float

    def ring(self, message_bytes, ranks):
        """Seconds of a ring all-reduce of ``message_bytes`` over ``ranks`` (0 for one rank):
        ``2 (ranks-1)/ranks`` of the message crosses each link, plus one latency per step."""
        ranks = np.asarray(ranks, np.float64)
        steps = 2.0 * (ranks - 1.0)
        return np.where(ranks > 1, steps / ranks * message_bytes / self.bandwidth
                        + steps * self.latency, 0.0)


@dataclass(frozen=True)
class Hardware:
    """An accelerator and the node it sits in.

    Parameters
    ----------
    name : str
    peak_flops : float
        Dense half-precision FLOP/s.
    memory_bytes : float
        Device memory.
    efficiency : float
        The fraction of ``peak_flops`` the layers reach, in (0, 1].
    node : Link
        The intra-node link (NVLink): tensor parallelism and neighbours in one node.
    network : Link
        The inter-node link per GPU (InfiniBand).
    gpus_per_node : int
        Tensor parallelism stays inside a node.
    """

    name: str
    peak_flops: float
    memory_bytes: float
    node: Link
    network: Link
    efficiency: float = 0.5
    gpus_per_node: int = 8

    def __post_init__(self):
        numbers(self.peak_flops, "peak_flops", strict=True)
        numbers(self.memory_bytes, "memory_bytes", strict=True)
        numbers(self.efficiency, "efficiency", strict=True, upper=1.0)
        positive_int(self.gpus_per_node, "gpus_per_node")

    def seconds(self, flops):
        """Time of ``flops`` at ``efficiency`` of the peak."""
        return np.asarray(flops, dtype=np.float64) / (self.peak_flops * self.efficiency)

    def with_efficiency(self, efficiency: float) -> Hardware:
        """The same hardware at another efficiency."""
        return replace(self, efficiency=efficiency)


LINKS = {link.name: link for link in (
    Link("NVLink3", 300e9, 3e-6),  # A100: 600 GB/s both directions
    Link("NVLink4", 450e9, 3e-6),  # H100, H200: 900 GB/s both directions
    Link("NVLink5", 900e9, 3e-6),  # B200: 1.8 TB/s both directions
    Link("IB-400G", 50e9, 5e-6),  # 400 Gb/s InfiniBand per GPU
)}

HARDWARE = {hw.name: hw for hw in (
    Hardware("A100-80GB", 312e12, 80 * GB, LINKS["NVLink3"], LINKS["IB-400G"]),
    Hardware("H100-80GB", 989e12, 80 * GB, LINKS["NVLink4"], LINKS["IB-400G"]),
    Hardware("H200-141GB", 989e12, 141 * GB, LINKS["NVLink4"], LINKS["IB-400G"]),
    Hardware("B200-180GB", 2250e12, 180 * GB, LINKS["NVLink5"], LINKS["IB-400G"]),
)}


def preset(table: dict, value, what: str):
    """``value`` itself, or the preset it names; an unknown name lists the presets."""
    if not isinstance(value, str):
        return value
    try:
        return table[value]
    except KeyError:
        raise ScheduleError(f"{what} must be one of {sorted(table)} or a {what} object (got "
                            f"{value!r})") from None
