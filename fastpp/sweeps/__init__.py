"""Sweeps: thousands of ``(schedule, p, n, m, costs)`` points, simulated inside Numba.

``fastpp.sweep`` takes a cartesian grid (each argument a value or a list) or an explicit table
of points, cuts the points into chunks, simulates each chunk on a pool of threads (the kernels
release the GIL) or on a Dask cluster, and returns one row per point. With ``out`` every chunk
is written to its own file as it finishes, so an interrupted sweep resumed with
``resume=True`` recomputes only the chunks that are missing or damaged and ends with every row
exactly once. Needs the ``sweep`` extra (pandas, pyarrow, tqdm); pandas is imported only when
a sweep runs.

One module per job, imports running one way: ``points`` (the grid or table), ``chunk`` (one
chunk validated, started and turned into rows), ``warmup`` (compiling), ``cluster`` (Dask),
``run`` (``sweep`` itself: chunks on threads), ``store`` (the ``out`` folder), ``analysis``.
"""

from .analysis import best_within_budget, pareto_front
from .chunk import COLUMNS
from .run import sweep
from .store import load
from .warmup import warm_up

__all__ = ["COLUMNS", "best_within_budget", "load", "pareto_front", "sweep", "warm_up"]
