"""fastpp: a fast, faithful simulator of pipeline-parallel training schedules.

Symbols, used everywhere in fastpp (SCHEDULES.md section 1):

=====  ==================================================================================
``p``  pipeline devices (ranks)
``n``  microbatches per iteration
``m``  chunks (model pieces) per device; ``V = p*m`` virtual stages
``s``  virtual stage index ``0..V-1`` in model order (the forward runs ``0 -> V-1``)
``r``  device index ``0..p-1``
``j``  microbatch index ``0..n-1``
=====  ==================================================================================

Times are per device of a plain pipeline (a chunk op takes ``f/m``); activation memory is in
units of what one microbatch leaves on a device of a plain pipeline (``M_B``).

>>> import fastpp
>>> result = fastpp.simulate(fastpp.build_schedule("1f1b", p=4, n=8), fastpp.Costs(f=1, b=2))
>>> result.makespan, result.peak_live.tolist()
(33.0, [4, 3, 2, 1])
"""

from . import theory
from ._version import __version__ as __version__
from .checks import ScheduleError, ScheduleTypeError
from .costs import Costs
from .generators.registry import SCHEDULES, ScheduleSpec, build_schedule
from .montecarlo import MonteCarlo
from .noise import Noise
from .ops import Op
from .schedule import Schedule
from .search import SearchResult, optimize
from .seed import Device, compute_theoretical_peak, gpipe_schedule, onef_oneb_schedule
from .simulate import Result, simulate
from .sweeps import best_within_budget, pareto_front, sweep

# measured runs and reports need pandas: imported when first used, so that `import fastpp`
# stays light
_MEASURED = ("MeasuredJob", "MeasuredRun", "MeasuredSteps", "WhatIf", "read_op_table",
             "read_torch_trace", "whatif")
# subpackages reached as attributes (``fastpp.model.plan``), imported on first use likewise
_LAZY = ("io", "measured", "model", "plot", "reports", "trace")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _MEASURED:
        from . import measured

        return getattr(measured, name)
    if name == "report":
        from .reports import report

        return report
    raise AttributeError(f"module 'fastpp' has no attribute {name!r}")


__all__ = [
    "SCHEDULES",
    "Costs",
    "Device",
    "MeasuredJob",
    "MeasuredRun",
    "MeasuredSteps",
    "MonteCarlo",
    "Noise",
    "Op",
    "Result",
    "Schedule",
    "ScheduleError",
    "ScheduleSpec",
    "ScheduleTypeError",
    "SearchResult",
    "WhatIf",
    "best_within_budget",
    "build_schedule",
    "compute_theoretical_peak",
    "gpipe_schedule",
    "onef_oneb_schedule",
    "optimize",
    "pareto_front",
    "read_op_table",
    "read_torch_trace",
    "report",
    "simulate",
    "sweep",
    "theory",
    "whatif",
]
