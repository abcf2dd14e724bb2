"""The error base and the checks every public entry point runs on its input, written once.

A check names the parameter, what it must be and what it got, and raises ``ScheduleError``
(a ``ValueError``), the one base of every error fastpp raises on bad input.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import FrozenInstanceError
from types import MappingProxyType

import numpy as np

MAX_INT = 2**31  # counts stay below it, so that products like n_per_p * p cannot wrap


class ScheduleError(ValueError):
    """The one base of every error fastpp raises on bad input: a schedule, its parameters, its
    costs, a sweep's, a search's or a plan's arguments are not valid. The message names the
    parameter, what it must be and what it got."""


class ScheduleTypeError(ScheduleError, TypeError):
    """An argument of the wrong type (also a ``TypeError``)."""


class MissingExtraError(ScheduleError, ImportError):
    """An optional dependency is not installed (also an ``ImportError``); the message names
    the extra that installs it, e.g. ``pip install 'fastpp[plot]'``."""


class Frozen:
    """An object checked once, when built, and not changed after: what the kernels read is what
    was checked (a frozen dataclass's contract, for a class with its own ``__init__``). Its
    attributes are set once by ``_freeze``: arrays become read-only copies and mappings
    read-only views, so a write into one raises instead of reaching the kernels unchecked;
    private ones (``_name``: caches of what the object computed) stay as given."""

    def _freeze(self, **fields) -> None:
        self.__dict__.update({name: value if name.startswith("_") else _fixed(value)
                              for name, value in fields.items()})

    def __setattr__(self, name: str, value) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}: a {type(self).__name__} "
                                  f"is checked when built and does not change (build another)")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}: a {type(self).__name__} is "
                                  f"checked when built and does not change")

    def __getstate__(self) -> dict:
        # pickled (and deep-copied) as plain values; __setstate__ freezes them again
        return {name: dict(value) if isinstance(value, MappingProxyType) else value
                for name, value in self.__dict__.items()}

    def __setstate__(self, state: dict) -> None:
        self._freeze(**state)


def read_only(arr: np.ndarray) -> np.ndarray:
    """A read-only view of ``arr``: the owner hands it out and passes the writable original to
    the kernels (Numba types read-only arrays apart: every kernel would compile twice)."""
    view = arr.view()
    view.flags.writeable = False
    return view


def _fixed(value):
    """``value`` as ``Frozen`` keeps it: an array a read-only copy, a mapping a read-only view
    of a copy."""
    if isinstance(value, np.ndarray):
        value = value.copy()
        value.flags.writeable = False
    elif isinstance(value, Mapping) and not isinstance(value, MappingProxyType):
        value = MappingProxyType(dict(value))
    return value


def missing_extra(what: str, package: str, extra: str) -> MissingExtraError:
    """The one message for a missing optional dependency: "``what`` needs ``package``: pip
    install 'fastpp[extra]'"."""
    return MissingExtraError(f"{what} needs {package}: pip install 'fastpp[{extra}]'")


def require(module: str, extra: str, what: str, package: str | None = None):
    """Import and return ``module``, or raise ``missing_extra(what, package, extra)``
    (``package`` defaults to the module's top name)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing_extra(what, package or module.split(".")[0], extra) from None


def show(value) -> str:
    """A short rendering of a value for an error message (at most 8 elements)."""
    if isinstance(value, np.generic):
        return str(value.item())
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        text = str(abs(value))  # (10**400 printed its 401 digits)
        return f"{'-' if value < 0 else ''}{text[0]}.{text[1:4]}e+{len(text) - 1}"
    if not isinstance(value, list | tuple | np.ndarray):
        return repr(value)
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged, e.g. [1, [2]]
        return repr(value)[:80]
    # as given: NumPy reads [2, True] as [2, 1] and [2, 'x'] as ['2', 'x']
    if isinstance(value, list | tuple) and any(isinstance(x, bool | np.bool_ | str)
                                               for x in value):
        return repr(list(value)[:8])
    if arr.ndim == 0:  # (an object array's one value too, not a list of it)
        return repr(arr.item()) if arr.dtype == object else str(arr.item())
    if arr.dtype == object:  # (each as shown alone: a huge int in a list too)
        return "[" + ", ".join(show(x) for x in list(arr.reshape(-1))[:8]) + "]"
    if arr.ndim > 1:  # (its nesting shown: flattened, [[1, 2]] read as the array [1, 2])
        text = str(arr.tolist())
        return text if len(text) <= 80 else text[:77] + "..."
    return str(arr.reshape(-1).tolist()[:8])


def listed(names, most: int = 40) -> str:
    """``names`` as a list for a message: all of them, or the first ``most`` and how many in
    all (never a list cut without a word, which reads as the whole of the choices)."""
    names = list(names)
    if len(names) <= most:
        return str(names)
    return f"{str(names[:most])[:-1]}, ... ({len(names)} in all)]"


def positive_int(value, name: str, upper: int | None = None, why: str = "") -> int:
    """``value`` as an ``int`` if it is a positive integer (not a bool), at most ``upper``
    (``why`` says why, in the message); a value of another type is a ``ScheduleTypeError``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ScheduleTypeError(f"{name} must be a positive integer (got {name}={value!r})")
    if value < 1:
        raise ScheduleError(f"{name} must be a positive integer (got {name}={value!r})")
    if upper is not None and value > upper:
        raise ScheduleError(f"{name} must be at most {upper:,}{why} (got {name}={value})")
    return int(value)


def nonnegative_int(value, name: str, upper: int | None = None, why: str = "") -> int:
    """``value`` as an ``int`` if it is an integer >= 0 (not a bool; another type is a
    ``ScheduleTypeError``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ScheduleTypeError(f"{name} must be an integer >= 0 (got {value!r})")
    if value < 0:
        raise ScheduleError(f"{name} must be an integer >= 0 (got {value!r})")
    if upper is not None and value > upper:  # (positive_int's bound and message)
        raise ScheduleError(f"{name} must be at most {upper:,}{why} (got {name}={value})")
    return int(value)


def positive_ints(values, name: str) -> np.ndarray:
    """``values`` as int64 if every one is a positive integer below ``2**31`` (a bool among
    them is not one: NumPy reads ``[2, True]`` as ``[2, 1]``)."""
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged, e.g. [1, [2]]
        arr = np.asarray([], object)
    bools = isinstance(values, list | tuple) and any(isinstance(x, bool | np.bool_)
                                                     for x in values)
    must = f"{name} must hold positive integers below 2**31 (got {show(values)})"
    if bools or arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ScheduleTypeError(must)
    if np.any(arr < 1) or np.any(arr >= MAX_INT):
        raise ScheduleError(must)
    return arr.astype(np.int64)


def number_array(values, name: str, must: str = "a number or an array of numbers"
                 ) -> np.ndarray:
    """``values`` as float64 if they are numbers (no strings or bools, which NumPy would
    convert), any value; a ``ScheduleTypeError`` saying what they ``must`` be otherwise."""
    given = values
    if _huge(values):
        given = _as_float(values)
    elif isinstance(values, list | tuple) and any(map(_huge, values)):
        given = [_as_float(x) if _huge(x) else x for x in values]  # ([10**400, 1] was
        # "must be ... numbers")
    try:
        raw = np.asarray(given)
    except ValueError:  # ragged
        raw = None
    # (a bool among numbers in a list is no number: NumPy would read True as 1.0)
    if raw is None or raw.dtype.kind not in "iuf" or (
            isinstance(values, list | tuple) and _holds_bool(values)):
        raise ScheduleTypeError(f"{name} must be {must} (got {show(values)})")
    return raw.astype(np.float64)


def _huge(value) -> bool:
    """Whether ``value`` is an int past int64's range: NumPy keeps it as an object, though it
    is a number, if a huge one."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63


def _as_float(value: int) -> float:
    """A huge int as a float, or infinite past float64's range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _holds_bool(values) -> bool:
    """Whether a (nested) list or tuple holds a bool, Python's or NumPy's."""
    return any(isinstance(x, bool | np.bool_) or (isinstance(x, list | tuple) and _holds_bool(x))
               for x in values)


def numbers(values, name: str, *, strict: bool = False, upper: float | None = None,
            missing: bool = False) -> np.ndarray:
    """``values`` as float64 if every one is finite and > 0 (``strict``) or >= 0, and at most
    ``upper``; with ``missing``, NaN stands for "not given" and passes."""
    x = one_number(values)
    if x is not None:
        # one number, the common case (a Costs has some twenty): judged without NumPy's
        # array reductions, which took a microsecond or more each
        if not (missing and x != x) and not (math.isfinite(x) and (x > 0 if strict else x >= 0)
                                             and (upper is None or x <= upper)):
            _not_numbers(values, name, strict, upper)
        return np.array(x)
    arr = number_array(values, name)
    if not missing and arr.size:  # two reductions, not five: NaN fails every comparison
        low, high = arr.min(), arr.max()
        if (low > 0 if strict else low >= 0) and high < math.inf and (upper is None
                                                                       or high <= upper):
            return arr
        _not_numbers(values, name, strict, upper)
    given = ~np.isnan(arr) if missing else np.ones(arr.shape, bool)
    bad = given & (~np.isfinite(arr) | ((arr <= 0) if strict else (arr < 0)))
    if upper is not None:
        bad |= given & (arr > upper)
    if np.any(bad):
        _not_numbers(values, name, strict, upper)
    return arr


def one_number(value) -> float | None:
    """``value`` as a float if it is one number (Python's or NumPy's, not a bool) within
    int64's range (larger ones are judged as arrays), else ``None``. A NumPy number is
    converted before it is compared: ``abs`` of int64's minimum, and 2**63 as a float16,
    overflow with a warning."""
    if type(value) is float or type(value) is int:
        return float(value) if abs(value) < 2**63 else None
    if isinstance(value, np.floating | np.integer):
        x = float(value)
        return x if abs(x) < 2**63 else None
    return None


def _not_numbers(values, name: str, strict: bool, upper) -> None:
    low = "> 0" if strict else ">= 0"
    need = (f"in {'(' if strict else '['}0, {upper:g}]" if upper is not None
            else f"finite and {low}")
    raise ScheduleError(f"{name} must be {need} (got {show(values)})")


def one_of(value, name: str, choices) -> None:
    """Raise unless ``value`` is one of ``choices`` (a bool is not the number 0 or 1 here)."""
    if type(value) is str and value in choices:  # the common case (a str equals no bool)
        return
    if isinstance(value, np.integer | np.bool_ | np.str_):  # (NumPy's, as Python's)
        value = value.item()
    # a type no choice has is a ScheduleTypeError; True == 1 in Python, but a bool answers
    # only where the choices are bools, and a number only where they are numbers
    kinds = {type(c) for c in choices}
    if kinds and type(value) not in kinds:  # (no choices: any value is refused as a value)
        raise ScheduleTypeError(f"{name} must be one of {list(choices)} (got {value!r})")
    if value not in choices:
        raise ScheduleError(f"{name} must be one of {list(choices)} (got {value!r})")


MISSPELT = "not read: a misspelt"  # how readers list a key they take for a misspelling


def near(word: str, known, cutoff: float = 0.85) -> str | None:
    """The one of ``known`` that ``word`` is most likely a misspelling of, or ``None``: for
    a key a reader does not know, the key it may have meant (difflib's ratio at least
    ``cutoff``: ``tensor_paralel_degree`` for ``tensor_parallel_degree``, not
    ``decoder_num_layers`` for ``num_layers``; a short name's two swapped letters, ``modle``,
    are 0.8 of ``model``)."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def name_list(values, name: str, choices) -> tuple:
    """``values`` as a tuple if it is a list or tuple of names among ``choices`` (a string
    alone is refused: iterated, it would give its letters)."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ScheduleTypeError(f"{name} must be a list of names among {list(choices)} (got "
                                f"{values!r})")
    # (a name is a string: an array's `in` is ambiguous, NumPy's ValueError)
    bad = [x for x in values if not isinstance(x, str) or x not in choices]
    if bad:
        raise ScheduleError(f"{name} must hold names among {list(choices)} (got {bad[0]!r})")
    return tuple(values)


def flag(value, name: str) -> bool:
    """``value`` as a ``bool`` if it is ``True`` or ``False`` (or NumPy's)."""
    one_of(value, name, (False, True))
    return bool(value)


def number(value, name: str, *, strict: bool = False, upper: float | None = None,
           lower: float | None = None) -> float:
    """``value`` as a ``float`` if it is one finite number > 0 (``strict``) or >= 0, at most
    ``upper`` and at least ``lower`` (> 0), each named in the message."""
    arr = number_array(value, name, "a number")  # (numbers' message allows arrays)
    if lower is not None:
        if arr.ndim == 0 and not (np.isfinite(arr) and arr >= lower):
            raise ScheduleError(f"{name} must be finite and >= {lower:g} (got {show(value)})")
    arr = numbers(value, name, strict=strict, upper=upper)
    if arr.ndim:
        raise ScheduleError(f"{name} must be one number (got {show(value)})")
    return float(arr)


def index(value, name: str, size: int) -> int:
    """``value`` as an ``int`` if it is an integer in ``0..size-1`` (another type is a
    ``ScheduleTypeError``)."""
    must = f"{name} must be an integer in 0..{size - 1} (got {value!r})"
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ScheduleTypeError(must)
    if not 0 <= value < size:
        raise ScheduleError(must)
    return int(value)


def indices(values, name: str, size: int) -> np.ndarray:
    """``values`` as int64 if every one is an integer in ``0..size-1``."""
    try:
        arr = np.asarray(values)
    except ValueError:  # ragged
        arr = np.asarray([], object)
    must = f"{name} must hold integers in 0..{size - 1} (got {show(values)})"
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ScheduleTypeError(must)
    if np.any(arr < 0) or np.any(arr >= size):
        raise ScheduleError(must)
    return arr.astype(np.int64)


def instance(value, cls, name: str, what: str):
    """``value`` if it is a ``cls`` (``what`` names it in the message)."""
    if not isinstance(value, cls):
        raise ScheduleTypeError(f"{name} must be a {what} (got {type(value).__name__})")
    return value


def digits(text: str, most: int | None = 18) -> bool:
    """Whether ``text`` is a count written in ASCII digits (``"²".isdigit()`` is True), at
    most ``most`` of them (None: any): by default what ``int`` reads without error and int64
    holds."""
    return text.isascii() and text.isdigit() and (most is None or len(text) <= most)


def file_path(value, name: str = "path"):
    """``value`` as a ``Path`` if it is a non-empty string or path."""
    from pathlib import Path

    if not isinstance(value, str | os.PathLike) or not str(value):
        raise ScheduleTypeError(f"{name} must be a file path (got {value!r})")
    return Path(value)


def expanded(value, name: str):
    """``Path(value)`` with ``~`` read as the shell reads it; ``~user`` of no user, where
    pathlib raises its RuntimeError, is a ``ScheduleError`` naming ``name``."""
    from pathlib import Path

    try:
        return Path(value).expanduser()
    except RuntimeError:
        raise ScheduleError(f"{name} must be a path the OS can use (got {str(value)!r}: no such "
                            f"user's home)") from None


def dataframe(df, name: str = "df", columns=()):
    """``df`` if it is a pandas DataFrame with the ``columns``: a tuple of the names it must
    have, or a dict of parameter -> the column that parameter names."""
    import pandas as pd

    instance(df, pd.DataFrame, name, "pandas.DataFrame")
    if isinstance(columns, dict):
        for param, col in columns.items():
            if not isinstance(col, str) or col not in df.columns:
                raise ScheduleError(f"{param} must be a column of {name}, one of "
                                    f"{listed(df.columns)} (got {col!r})")
    missing = [c for c in columns if c not in df.columns] if not isinstance(columns, dict) else []
    if missing:
        raise ScheduleError(f"{name} must have the columns {missing} (got "
                            f"{listed(df.columns)})")
    return df


@contextlib.contextmanager
def writable(path, name: str = "path"):
    """An ``OSError`` while writing ``path`` (a folder, a missing parent, no permission)
    raised as a ``ScheduleError`` naming the parameter."""
    try:
        yield
    except OSError as err:
        raise ScheduleError(f"{name} must be a file path that can be written (got "
                            f"{str(path)!r}: {err.strerror or err})") from None


def will_write(value, name: str = "path") -> None:
    """Refuse before long work an output file that could not be written (``writable`` turns
    the failure into the same message while writing): an empty name, a folder, or a file in a
    folder that does not exist. ``None`` (no output) passes."""
    if value is None:
        return
    from pathlib import Path

    path = Path(value)
    why = ("an empty name" if not str(value) else "a folder" if path.is_dir() else
           f"no folder {str(path.parent)!r}" if not path.parent.is_dir() else "")
    if why:
        raise ScheduleError(f"{name} must be a file path that can be written (got "
                            f"{str(value)!r}: {why})")


class _Stdout:
    """Standard output that drops what it is given once its reader has left (``| head``)."""

    def __init__(self, stream):
        self.stream, self.gone = stream, False

    def write(self, text):
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._left()
        return len(text)

    def flush(self):
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._left()

    def _left(self):
        self.gone = True
        # what the stream still holds, and what it is given until the process ends, goes
        # nowhere: no second BrokenPipeError when Python flushes it at exit
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self.stream.fileno())
        os.close(null)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def despite_reader(main, *args) -> int:
    """``main(*args)``'s exit code, run so that its reader leaving (``| head`` closes standard
    output) costs no file it writes: what it prints after goes nowhere, and the code is 1,
    said to no one (the reader is gone)."""
    import sys

    stdout = sys.stdout = _Stdout(sys.stdout)
    try:
        code = main(*args)
        stdout.flush()  # (the last lines, which the reader may not have taken)
    finally:
        sys.stdout = stdout.stream
    return (code or 1) if stdout.gone else code


def progress_bar(total: int, enabled: bool, **options):
    """A tqdm bar of ``total`` steps (``options``: tqdm's), or one that shows nothing where
    not ``enabled`` or tqdm is not installed (a bar is a nicety, not a requirement). tqdm is
    imported only when enabled: its import cost a fifth of a warm sweep's CPU."""
    if enabled:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            return tqdm(total=total, dynamic_ncols=True, **options)
    return _NoBar()


class _NoBar:
    def update(self, k):
        pass

    def close(self):
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is (``until_interrupted``), so that what is open closes and
    no temporary file is left."""


def _terminated(*_):
    raise Terminated


def until_interrupted(main, *args) -> int:
    """``despite_reader(main, *args)``, with Ctrl-C a line on standard error and exit code
    130 (a shell's), not a traceback, and SIGTERM the same with 143: every file fastpp writes
    is whole or not there (``atomic_write``)."""
    import signal
    import sys
    import threading

    # (only where SIGTERM would kill: an embedding program's handler, or SIG_IGN, stays)
    mine = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    if mine:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return despite_reader(main, *args)
    except (KeyboardInterrupt, ImportError) as error:
        # (Ctrl-C inside an extension module's import, as OR-Tools' pybind11 one, comes out
        # as "ImportError: initialization failed" raised from the KeyboardInterrupt)
        stop = error if isinstance(error, KeyboardInterrupt) else error.__cause__
        if not isinstance(stop, KeyboardInterrupt):
            raise
        what = "terminated" if isinstance(stop, Terminated) else "interrupted"
        print(f"\n{what}: the files reported above are complete; no other was written",
              file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    finally:
        if mine:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def atomic_write(path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``:
    a reader never sees half a file, and an interrupted write leaves none."""
    import uuid
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def make_folder(path, name: str = "--out"):
    """Make the output folder ``path`` (and its parents) before long work, or a
    ``ScheduleError`` naming ``name``: a file on the way, no permission."""
    from pathlib import Path

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ScheduleError(f"{name} must be a folder that can be made (got {str(path)!r}: "
                            f"{err.strerror or err})") from None
    return path


def optional_text(value, name: str) -> str | None:
    """``value`` if it is a string or ``None``."""
    if value is not None and not isinstance(value, str):
        raise ScheduleTypeError(f"{name} must be a string or None (got {type(value).__name__})")
    return value


def in_file(error, keys: dict) -> str:
    """`` (in the file, t is 'tensor_parallel_size', ...)``: the fields ``error``'s message
    names, as a file names them (``keys``: a field's key, or a tuple of its keys), for an
    importer re-raising a check of its own fields; "" where it names none."""
    said = [f"{ours} is {'/'.join(map(repr, key)) if isinstance(key, tuple) else repr(key)}"
            for ours, key in keys.items() if key and re.search(rf"\b{ours}\b", str(error))]
    return f" (in the file, {', '.join(said)})" if said else ""


def renamed(function: str, old: str, new: str, old_value, new_value, default):
    """A keyword's value under its new name, taking the old name for one release with a
    ``DeprecationWarning`` (``ScheduleError`` if both are given). ``old_value`` None means the
    old name was not used."""
    if old_value is None:
        return new_value
    warnings.warn(f"{function}({old}=...) is deprecated and goes in the next release: give "
                  f"{new}, as RunConfig and plan name it", DeprecationWarning, stacklevel=3)
    if not (type(new_value) is type(default) and new_value == default):
        raise ScheduleError(f"give {new} or {old}, not both (got {new}={new_value!r}, "
                            f"{old}={old_value!r})")
    return old_value


def memory_limit_flag(text: str | None, p: int) -> float | None:
    """The value of a ``--memory-limit`` flag: a number of units, or a multiple of ``p`` such
    as ``1.5p``; ``none`` (or no flag): no limit."""
    if text is None or text.lower() in ("none", "inf", "unlimited"):
        return None
    match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(\*?\s*p)?\s*", text)
    try:
        value = float(match.group(1)) if match else None
    except ValueError:
        value = None
    if value is None or not value > 0 or not math.isfinite(value):
        raise ScheduleError(f"--memory-limit must be a number of units > 0 or a multiple of p "
                            f"such as '1.5p' (got {text!r})")
    return value * p if match.group(2) else value


def seconds_flag(text: str) -> float:
    """argparse's type for a time limit: finite seconds > 0 (named by its flag)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        import argparse  # (the command line's alone: not at fastpp's import)

        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0 (got {text!r})")
    return value


def flag_names(parser) -> dict[str, str]:
    """Each option of an ``argparse`` parser that takes a value, by the name of that value
    (``dest``): the flag that sets it (the longest). On/off flags are left out: a message's
    ``x=False`` is no value one types."""
    return {a.dest: max(a.option_strings, key=len) for a in parser._actions
            if a.option_strings and a.nargs != 0}


def switch_names(parser) -> dict[str, str]:
    """Each on flag of an ``argparse`` parser (``store_true``), by the name of the parameter
    it sets: given, the flag is ``name=True``; ``name must be False`` means "leave it out"."""
    return {a.dest: max(a.option_strings, key=len) for a in parser._actions
            if a.option_strings and a.nargs == 0 and a.const is True and a.default is False}


def by_flags(message: str, flags: dict[str, str], switches: dict[str, str] | None = None
             ) -> str:
    """``message`` with the values a user typed named by their flags, not by the library's
    parameters that they become: the message's subject (``tp must ...``, at its start or after
    a colon, or a part of it: ``link_delay rank must``), what it is compared with (``w must
    be <= b``), the ``(got name=...)`` list, ``costs.name``, a longer name given a value
    (``global_batch=8``), and a call it suggests (``from_megatron(..., vocab=N)``: ``--vocab
    N``). Short names inside expressions (``p*n*m``, ``2*cp``) are symbols, left alone. An on
    flag of ``switches`` (``switch_names``) is named as typed: ``realtime must be False`` is
    ``--realtime must not be given``, ``realtime=True`` is ``--realtime``."""
    for dest, switch in (switches or {}).items():
        name = re.escape(dest)
        message = re.sub(rf"(?:^|(?<=: )){name} must be False\b", f"{switch} must not be given",
                         message)
        message = re.sub(rf"(?<![\w.*/+-]){name}=True\b", switch, message)
    message = re.sub(r" where costs\.(\w+) is not given",
                     lambda m: m[0] if m[1] in flags else "", message)
    message = re.sub(r"\bcosts\.(\w+)", lambda m: flags.get(m[1], m[0]), message)
    message = re.sub(r"\b\w+\(\.\.\., (\w+)=(\w+)\)",
                     lambda m: f"{flags[m[1]]} {m[2]}" if m[1] in flags else m[0], message)
    for dest in flags:
        name = re.escape(dest)
        subject = rf"(?:^|(?<=: )){name}(?=(?: [a-z]+)?\s+must\b)"
        compared = rf"(?<=must be [<>]= ){name}(?=$|[\s),;:])"
        listed = rf"(?:(?<=\(got )|(?<=, )(?=[^()]*\))){name}(?==)"
        valued = [rf"(?<![\w.*/+-]){name}(?==)"] if len(dest) > 2 else []
        message = re.sub("|".join([subject, compared, listed, *valued]), flags[dest], message)
    return message


def known_keywords(label: str):
    """A decorator: the function refuses a keyword it does not take, too many positional
    arguments or a missing one with a ``ScheduleTypeError`` that names it and the ones it
    takes (Python's own is a bare ``TypeError``); ``label`` is the name the user called (a
    class's for its ``__init__``). A call pays one frame: the arguments are looked at only
    when the call fails."""

    def wrap(function):
        signature = inspect.signature(function)
        params = signature.parameters
        names = [k for k, v in params.items() if k not in ("self", "cls", "_cls") and v.kind in (
            v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
        free = any(v.kind == v.VAR_KEYWORD for v in params.values())

        @functools.wraps(function)
        def checked(*args, **keywords):
            try:
                return function(*args, **keywords)
            except TypeError:
                unknown = [k for k in keywords if k not in names]
                if unknown and not free:  # (Python refused the call before it ran)
                    raise ScheduleTypeError(f"{label} has no keyword {unknown[0]!r} (its "
                                            f"keywords: {', '.join(names)})") from None
                try:  # (a call Python refused; a TypeError from inside the body is raised)
                    signature.bind(*args, **keywords)
                except TypeError as err:
                    raise ScheduleTypeError(f"{label} cannot be called so: {err} (its "
                                            f"parameters: {', '.join(names)})") from None
                raise

        return checked

    return wrap
