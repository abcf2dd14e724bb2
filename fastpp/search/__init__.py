"""Schedule search: the fastest order under a memory limit, with a proven bound.

``optimize`` runs the layers below, each reading and producing plain ``Schedule``s:

- ``zb_greedy``, ``v_greedy`` (jitted): the Zero Bubble authors' greedy schedulers, loop and
  V placements; ``list_scheduler`` (jitted): a memory-aware list scheduler, any one-route
  placement; ``greedy`` runs them at their settings and keeps what fits;
- ``improve`` (jitted): local search over device orders, evaluated by the engine's kernels;
- ``exact``: a CP-SAT model (OR-Tools, optional), warm-started from the best known order;
- ``bounds``: analytic lower bounds; ``problem``: the instance and its checks.
"""

from .optimizer import SearchInterrupted, SearchResult, optimize

__all__ = ["SearchInterrupted", "SearchResult", "optimize"]
