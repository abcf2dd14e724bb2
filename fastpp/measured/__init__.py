"""Measured runs: real PyTorch pipeline runs read from their profiler traces, replayed op by op,
and costs calibrated from them.

Reading needs no torch (``read``, ``align``, ``run``); ``runner`` starts real
``torch.distributed.pipelining`` ranks and is the only module that imports torch.
"""

from .predict import predictions
from .run import Comparison, MeasuredRun, read_torch_trace
from .runner import measure, measure_many

__all__ = ["Comparison", "MeasuredRun", "measure", "measure_many", "predictions",
           "read_torch_trace"]
