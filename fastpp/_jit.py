"""The one place that owns Numba's options.

Every kernel is compiled with ``cache=True`` and without ``fastmath`` (which would reorder float
sums and break exact agreement with the pure-Python reference in ``tests/``). One kernel, the
Monte Carlo's ``exp``, lets LLVM fuse a multiply and an add into one FMA (``fused``): its
polynomial runs a quarter faster, rounded once per step instead of twice, and nothing is
reordered. So every lognormal factor may differ in its last bit (still within 1 ulp of libm)
between the JIT and pure Python (``NUMBA_DISABLE_JIT``), and on a CPU without FMA.

Numba's on-disk cache keys a function on its own source file only: a kernel that inlines a
helper from another module would keep its stale machine code after that helper changes. So all
fastpp kernels share one cache folder named after a fingerprint of every module that holds
jitted code; any edit to any of them selects a fresh folder. ``FASTPP_CACHE_DIR`` moves the
root (default: ``$XDG_CACHE_HOME/fastpp`` or ``~/.cache/fastpp``).

Compile time is Numba's per function (typing and lowering; LLVM's optimization level barely
moves it), paid once per process for the NumPy functions kernels call: ``np.zeros``,
``np.full`` and an omitted dtype each compile NumPy's helpers once more per shape and dtype,
so the simulation kernels allocate with ``np.empty(shape, dtype)`` and ``fill``.

Hot loops index with unsigned integers (``U``, ``ONE``): Numba wraps a signed index around,
a compare and a select at every access (``kernels.timeline`` 1.3-1.6x the time an op). A
uint64 meeting an int64 in arithmetic gives a float, so no such index meets a signed one.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numba
import numpy as np
from numba.core import event
from numba.core.registry import CPUDispatcher

_PACKAGE = Path(__file__).resolve().parent


def jitted_modules() -> list[Path]:
    """The package's modules that hold jitted code: those that import ``jit`` from this one
    (derived, so that a new kernel module counts)."""
    # (``from ._jit import ONE, U, jit`` too: matching the bare import alone had left
    # kernels.py, compiled.py and vshape.py out of the cache's fingerprint since 3 December)
    uses_jit = re.compile(r"^from \.+_jit import [\w, ]*\bjit\b", re.MULTILINE)
    return [path for path in sorted(_PACKAGE.rglob("*.py"))
            if uses_jit.search(path.read_text(encoding="utf-8"))]


def _jitted_sources() -> list[Path]:
    """The jitted modules, and those whose constants they freeze (Numba bakes a global into
    the compiled code): op codes in ``ops.py``, ``MAX_TIME`` and the cost slots in
    ``costs.py``, each schedule's placement and kind in ``generators/registry.py``
    (``batch.PLACEMENT_CODE``); and this one, whose options (``fused``) Numba's cache does not
    key on. A new kernel module is covered, and an edit to a module without kernels keeps the
    cache warm."""
    return [_PACKAGE / "_jit.py", _PACKAGE / "ops.py", _PACKAGE / "costs.py",
            _PACKAGE / "generators" / "registry.py", *jitted_modules()]


def _cache_dir() -> str:
    digest = hashlib.sha256(numba.__version__.encode())
    for path in _jitted_sources():
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    root = os.environ.get("FASTPP_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "fastpp")
    return os.path.join(root, "numba-" + digest.hexdigest()[:16])


CACHE_DIR = _cache_dir()
U, ONE = np.uint64, np.uint64(1)  # unsigned indices (above)


class CompileClock(event.Listener):
    """Wall seconds Numba spent compiling while it was installed (``compile_clock``): the
    outermost compiles only (a kernel's compile holds its callees'); Numba compiles one
    function at a time, under its global lock."""

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._start = 0.0

    def on_start(self, event) -> None:
        if self._depth == 0:
            self._start = time.perf_counter()
        self._depth += 1

    def on_end(self, event) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._start


@contextmanager
def compile_clock():
    """A ``CompileClock`` counting while the block runs: a search's time limit is for
    searching, not for compiling its kernels on their first use (30 s of them on an empty
    cache had left a 10 s search no time for its exact model)."""
    clock = CompileClock()
    with event.install_listener("numba:compile", clock):
        yield clock


_BLOCKS: list[dict] = []  # the open announce_compiles blocks: whether each has said it


def say_compiling(message: str) -> None:
    """Print ``message`` on stderr, once inside an ``announce_compiles`` block (the command
    line's notice and a warm-up's own each said it there, twice)."""
    if _BLOCKS and _BLOCKS[-1]["said"]:
        return
    if _BLOCKS:
        _BLOCKS[-1]["said"] = True
    print(message, file=sys.stderr, flush=True)


class _Announcer(event.Listener):
    """Says ``message`` when Numba first starts compiling in its block
    (``announce_compiles``)."""

    def __init__(self, message: str):
        self.message = message

    def on_start(self, event) -> None:
        say_compiling(self.message)

    def on_end(self, event) -> None:
        pass


COMPILING = ("fastpp: compiling its kernels for this machine, once (later runs load them from "
             "the cache)")


@contextmanager
def announce_compiles(message: str = COMPILING):
    """Say ``message`` on stderr when a kernel first compiles inside the block (a command's
    first run on a machine waits 10-30 s for Numba, and said nothing), and nothing where
    every kernel loads from the cache."""
    _BLOCKS.append({"said": False})
    try:
        with event.install_listener("numba:compile", _Announcer(message)):
            yield
    finally:
        _BLOCKS.pop()


def disabled() -> bool:
    """Whether Numba runs every kernel as plain Python (``NUMBA_DISABLE_JIT=1``): nothing is
    compiled, so nothing is cached."""
    return bool(numba.config.DISABLE_JIT)


def jit(func=None, *, signature=None, internal=False, fused=False):
    """Compile ``func`` in nopython mode with fastpp's options.

    ``cache=True``; no ``fastmath``; ``nogil=True`` so that sweeps run kernels on several
    threads at once (Numba's ``parallel=True`` would add half a minute to a cold compile); no
    C callback wrapper, which nothing uses and every function would compile.
    A ``signature`` compiles once: small helpers called from many places with constants and
    mixed int widths would otherwise compile once per combination of types.
    ``internal`` marks a helper that only other kernels call: Numba then builds no Python
    wrapper for it (unboxing every argument: a fifth of a small helper's compile time), and
    calling it from Python fails. An internal helper's ``signature`` compiles (or loads from
    the cache) when a kernel that calls it first compiles, not at import: a kernel loaded
    from the cache holds its callees' code, so a warm process never needs the helper.
    ``fused`` allows FMA contraction (``fastmath={"contract"}``) and nothing else of fastmath.
    """

    def wrap(f):
        saved = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = CACHE_DIR  # read by Numba's cache locator at decoration time
        try:
            options = {"cache": True, "nogil": True, "fastmath": {"contract"} if fused else False,
                       "no_cfunc_wrapper": True,
                       "no_cpython_wrapper": internal}
            eager = signature is not None and not internal
            kernel = (numba.njit(signature, **options) if eager else numba.njit(**options))(f)
        finally:
            numba.config.CACHE_DIR = saved
        if internal and isinstance(kernel, CPUDispatcher):  # (not under NUMBA_DISABLE_JIT)
            kernel.__class__ = _Internal
            kernel.signature = signature
        return kernel

    return wrap if func is None else wrap(func)


class _Internal(CPUDispatcher):
    """A helper without a Python wrapper (Numba's call from Python would crash the process),
    compiled with its ``signature``, if any, when a kernel calling it is first typed."""

    signature = None

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.py_func.__qualname__} is called only from fastpp's jitted "
                        f"code (it has no Python wrapper)")

    def get_call_template(self, args, kws):
        # what numba.njit(signature) does at decoration: compile it, then no other types
        if self.signature is not None and self._can_compile:
            self.compile(self.signature)
            self.disable_compile()
        return super().get_call_template(args, kws)
