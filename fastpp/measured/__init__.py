"""Measured runs: real PyTorch pipeline runs read from their profiler traces, replayed op by op,
and costs calibrated from them; data-parallel jobs read from op tables (``job``) and their
what-if analysis (``whatif``).

Reading needs no torch (``read``, ``align``, ``run``); ``runner`` starts real
``torch.distributed.pipelining`` ranks and is the only module that imports torch.
"""

from .job import MeasuredJob, read_op_table
from .predict import predictions
from .run import Comparison, MeasuredRun, read_torch_trace
from .runner import measure, measure_many
from .steps import MeasuredSteps, read_steps
from .whatif import WhatIf, whatif

__all__ = ["Comparison", "MeasuredJob", "MeasuredRun", "MeasuredSteps", "WhatIf", "measure",
           "measure_many", "predictions", "read_op_table", "read_steps", "read_torch_trace",
           "whatif"]
