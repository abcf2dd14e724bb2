"""A sweep's ``out`` folder: a Parquet dataset that pandas, DuckDB and Dask open as it is.

Chunk ``c`` is ``out/part-c.parquet`` (``.csv`` without pyarrow); what resuming needs sits in
``out/_fastpp/``, which the readers skip (a leading underscore): ``manifest.json`` naming the
sweep (with ``invalid=``, which decides the rows, and the fastpp version and code that computed
them: a resume by another is refused), ``lock`` while a sweep writes there, and ``part-c.json``
with the chunk's row count, skipped points and the part's digest. Each file is written through a
temporary file (a leading dot, also skipped) and renamed, the JSON last. A chunk counts as done
only when both exist and the part reads back with that row count, this chunk's points in order
and that digest, so a sweep killed at any moment, a file damaged on disk or another sweep's part
copied in costs at most a recomputation. A chunk with no rows (all its points skipped) has no
part file.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import shutil
import socket
from pathlib import Path

from .._version import __version__
from ..checks import ScheduleError, atomic_write, expanded, file_path, require
from .points import chunk_len

META = "_fastpp"
# the package's modules whose code computes a sweep's rows: a resume by other code would mix
# its rows with the stored ones (the checks, messages, readers and this store are not hashed:
# an edit there leaves a sweep resumable)
ROW_CODE = ("batch.py", "compiled.py", "costs.py", "dependencies.py", "engine.py", "kernels.py",
            "montecarlo.py", "noise.py", "ops.py", "placement.py", "schedule.py", "simulate.py",
            "theory.py", "generators/*.py", "sweeps/*.py")
NOT_ROW_CODE = ("sweeps/store.py",)


class SkipReasons(dict):
    """A sweep's skipped points per reason (``df.attrs["skip_reasons"]``), read-only.

    pandas deep-copies a frame's ``attrs`` on every selection (each column ``itertuples``
    reads, each mask): a plain dict of some forty reasons made iterating a default sweep's
    rows ten times slower. Being read-only, this one is its own copy; being a dict, it goes
    into a Parquet file's metadata as pandas writes ``attrs`` there.
    """

    def _read_only(self, *args, **kwargs):
        raise TypeError("skip_reasons is read-only: copy it with dict(...) to change it")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):  # pickled (to Dask workers) as the counts it holds
        return SkipReasons, (dict(self),)


@functools.cache
def code_identity() -> str:
    """A digest of the source of the modules that compute a sweep's rows (``ROW_CODE``): two
    installs agree on it only if they compute the same rows. About 0.4 MB read once."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for pattern in ROW_CODE:
        for path in sorted(root.glob(pattern)):
            if path.relative_to(root).as_posix() in NOT_ROW_CODE:
                continue
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _other_code(old: dict, new: dict) -> str | None:
    """What makes the fastpp that wrote the manifest ``old`` another one than this (``new``),
    in words, or None."""
    if (old.get("version"), old.get("code")) == (new["version"], new["code"]):
        return None
    if old.get("version") is None:
        return "it was written by a fastpp that did not record its version"
    return (f"it was written by fastpp {old.get('version')} (code {old.get('code')}), this is "
            f"fastpp {new['version']} (code {new['code']})")


def _differs(old: dict, new: dict) -> str:
    """What makes a stored sweep's manifest ``old`` another sweep than ``new``, in words."""
    said = []
    if old.get("points") != new["points"]:
        said.append(f"{old.get('points')} points, where these arguments make {new['points']}")
    elif old.get("fingerprint") != new["fingerprint"]:
        said.append("as many points, but other ones: another grid, other costs or another "
                    "invalid=")
    if old.get("chunk_size") != new["chunk_size"]:
        said.append(f"chunks of {old.get('chunk_size')} points, where "
                    f"chunk_size={new['chunk_size']}")
    return "; ".join(said)


class Store:
    """The folder of one sweep; raises ``ScheduleError`` if ``folder`` holds anything else."""

    def __init__(self, folder, fingerprint: str, total: int, chunk_size: int, resume: bool):
        folder = self.check(folder, fingerprint, total, chunk_size, resume, taken=False)
        try:
            import pyarrow  # noqa: F401

            fmt = "parquet"
        except ImportError:
            fmt = "csv"
        manifest = _manifest(fingerprint, total, chunk_size)
        self.lock = None
        try:
            fmt = self._open(folder, manifest, fmt, resume)
        except BaseException:
            if self.lock is not None:  # (refused: the folder stays as it was)
                self.lock.release()
            raise
        self.folder, self.format, self.chunk_size = folder, fmt, chunk_size

    @staticmethod
    def check(folder, fingerprint: str, total: int, chunk_size: int, resume: bool,
              taken: bool = True) -> Path:
        """``folder`` as a path if a sweep of these points may be stored there, else the
        ``ScheduleError`` opening it would raise (``sweep(check_only=True)``: nothing made,
        nothing taken); with ``taken=False`` only what needs no look inside it."""
        if not isinstance(folder, str | os.PathLike) or not str(folder):
            # '' would be Path('.'): the working directory, never what was meant
            raise ScheduleError(f"out must be a folder path (got {folder!r})")
        folder = expanded(folder, "out")  # (~ as pandas' readers expand it)
        folder = _usable(folder)
        if folder.exists() and not folder.is_dir():
            raise ScheduleError(f"out must be a folder (got the file {str(folder)!r})")
        above = next((x for x in folder.parents if x.exists()), None)
        if above is not None and not above.is_dir():
            raise ScheduleError(f"out must be a folder that can be made (got {str(folder)!r}: "
                                f"{str(above)!r} is a file)")
        if taken:
            _held(folder, _manifest(fingerprint, total, chunk_size), resume)
        return folder

    def _open(self, folder: Path, manifest: dict, fmt: str, resume: bool) -> str:
        """Take ``folder`` (``self.lock``) and check or write its manifest; the format of its
        parts."""
        if (folder / META / "manifest.json").exists():
            # first: a sweep running there is the news, whatever its arguments
            self.lock = Lock(folder / META / "lock", folder)
        old = _held(folder, manifest, resume)
        path = folder / META / "manifest.json"
        if old is not None:
            fmt = old["format"]
        try:
            (folder / META).mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a parent that is a file, a read-only or missing mount
            raise ScheduleError(f"out must be a folder that can be made and written (got "
                                f"{str(folder)!r}: {error.strerror or error})") from None
        self.lock = self.lock or Lock(folder / META / "lock", folder)
        # (held now: a write a killed process left half-done, its temporary file, is gone;
        # atomic_write's own cleanup does not run under SIGKILL or a SIGTERM not handled)
        for stale in (*folder.glob(".*.tmp"), *(folder / META).glob(".*.tmp")):
            try:
                stale.unlink(missing_ok=True)
            except OSError:  # (a read-only folder: its finished sweep is still read)
                pass
        manifest["format"] = fmt
        try:
            if old != manifest:  # (a finished sweep in a read-only folder is still read)
                atomic_write(path, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)))
        except OSError as error:
            raise ScheduleError(f"out must be a folder that can be written (got "
                                f"{str(folder)!r}: {error.strerror or error})") from None
        return fmt

    def close(self) -> None:
        """Let another sweep use the folder."""
        self.lock.release()

    def _part(self, c: int) -> Path:
        return self.folder / f"part-{c:06d}.{self.format}"

    def _meta(self, c: int) -> Path:
        return self.folder / META / f"part-{c:06d}.json"

    def has(self, c: int) -> bool:
        """Is chunk ``c`` complete on disk, and this sweep's? A damaged chunk, or one of
        another sweep or another chunk, is removed, to be recomputed."""
        try:
            info = json.loads(self._meta(c).read_text())
            ok = (chunk_problem(self.read(c), info, c, self.chunk_size) is None
                  and (info["rows"] == 0 or info.get("digest") == _digest(self._part(c))))
        except Exception:  # missing, truncated or garbled
            ok = False
        if not ok:
            for path in (self._part(c), self._meta(c)):
                if path.is_dir():  # (unlink cannot remove one; the write then names it)
                    continue
                path.unlink(missing_ok=True)
        return ok

    def write(self, c: int, frame, skipped: dict[str, int]) -> None:
        try:
            if len(frame) and self.format == "parquet":
                atomic_write(self._part(c), lambda tmp: frame.to_parquet(tmp, index=False))
            elif len(frame):
                atomic_write(self._part(c), lambda tmp: frame.to_csv(tmp, index=False))
            # the part's bytes, digested: another sweep's part of the same points (other
            # costs) copied in reads as well as this one's
            meta = json.dumps({"rows": len(frame), "skipped": skipped,
                               "digest": _digest(self._part(c)) if len(frame) else None})
            atomic_write(self._meta(c), lambda tmp: tmp.write_text(meta))
        except OSError as error:  # a folder where a chunk's file goes, a full or read-only disk
            # (rename's second name is the one that failed; a file gone, as when another
            # process removed the folder, may name none)
            where = error.filename2 or error.filename
            raise ScheduleError(f"out={str(self.folder)!r} cannot take chunk {c} "
                                f"({error.strerror or error}"
                                f"{'' if where is None else f': {where}'})") from None

    def read(self, c: int):
        """Chunk ``c``'s rows (``None`` for a chunk without rows)."""
        import pandas as pd

        path = self._part(c)
        if not path.exists():
            return None
        if self.format == "parquet":
            return pd.read_parquet(path)
        return read_csv(path)

    def skipped(self, c: int) -> dict[str, int]:
        return json.loads(self._meta(c).read_text())["skipped"]


def chunk_problem(frame, info, c: int, chunk_size: int) -> str | None:
    """What makes ``frame`` (``Store.read``'s) and its ``info`` (its ``part-c.json``) not
    chunk ``c`` of a sweep of chunks of ``chunk_size`` points, or None. A row count alone
    took another sweep's part, or a part of junk columns, as this one's."""
    rows, skipped = info.get("rows"), info.get("skipped")
    if type(rows) is not int or rows < 0 or not isinstance(skipped, dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in skipped.items()):
        return f"its counts are not counts ({info!r})"
    if rows == 0:
        return None if frame is None else "a part beside a count of 0 rows"
    if frame is None or len(frame) != rows:
        return f"{0 if frame is None else len(frame)} rows of {rows}"
    lacking = [k for k in ("point", "schedule", "makespan") if k not in frame]
    if lacking:
        return f"lacking {lacking}"
    point = frame["point"].to_numpy()
    if not (point.dtype.kind in "iu" and point[0] >= c * chunk_size
            and point[-1] < (c + 1) * chunk_size and (point[1:] > point[:-1]).all()):
        return f"points not this chunk's, in order ({point[0]}..{point[-1]})"
    return None


def load(out):
    """The rows of a sweep folder, finished or not, with what pandas alone does not give.

    Parameters
    ----------
    out : path
        A sweep's ``out`` folder (possibly still being written, or interrupted).

    Returns
    -------
    pandas.DataFrame
        The finished chunks' rows in point order, with ``attrs["skipped"]`` and
        ``attrs["skip_reasons"]`` as ``sweep`` gives them, and ``attrs["complete"]``: whether
        every chunk is there.

    Raises
    ------
    ScheduleError
        If ``out`` is not a sweep's folder.
    """
    pd = require("pandas", "sweep", "fastpp.sweeps.load")

    folder = _usable(file_path(out, "out"))
    path = folder / META / "manifest.json"
    if not path.exists():
        raise ScheduleError(f"out must be a sweep's folder (got {str(folder)!r}, which has no "
                            f"{META}/manifest.json)")
    manifest = read_manifest(path)
    chunks = -(-manifest["points"] // manifest["chunk_size"])
    frames, reasons, done = [], {}, 0
    # the chunks written, not every chunk the manifest counts: a damaged count (10**18
    # points) would be a loop without end
    written = sorted({int(m.stem[5:]) for m in (folder / META).glob("part-*.json")
                      if re.fullmatch(r"part-[0-9]{6,}", m.stem)})
    for c in (c for c in written if c < chunks):
        meta = folder / META / f"part-{c:06d}.json"
        part = folder / f"part-{c:06d}.{manifest['format']}"
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):  # not finished yet
            continue
        try:
            frame = None
            if part.exists():
                frame = (pd.read_parquet(part) if manifest["format"] == "parquet" else
                         read_csv(part))
            # a part of another table, another sweep or chunk (or cut short) reads fine: its
            # rows, columns and points tell
            problem = chunk_problem(frame, info, c, manifest["chunk_size"])
            if problem is None and frame is not None and info.get("digest") not in (
                    None, _digest(part)):  # (folders written before 5 December have none)
                problem = "a part that is not the one written (its digest differs)"
            if problem is not None:
                raise ValueError(problem)
            if frame is not None:
                frames.append(frame)
            for reason, count in info["skipped"].items():
                reasons[reason] = reasons.get(reason, 0) + count
        except Exception as error:  # pyarrow's ArrowInvalid, pandas' ParserError, a bad key
            raise ScheduleError(f"out {str(folder)!r} has a damaged chunk {c} ({part.name} or "
                                f"{META}/{meta.name}: {type(error).__name__}: {error}); run the "
                                "sweep again with resume=True to recompute it") from error
        done += 1
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    df.attrs.update(skipped=sum(reasons.values()), skip_reasons=SkipReasons(reasons),
                    complete=done == chunks)
    return df


def kept(out) -> tuple[int, int] | None:
    """``(points done, points in all)`` of the sweep folder ``out`` (its chunks' counts, not
    their rows: cheap), or None if it holds no sweep yet."""
    try:
        manifest = json.loads((Path(out) / META / "manifest.json").read_text())
        total, size = manifest["points"], manifest["chunk_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if type(total) is not int or type(size) is not int or size < 1:  # (damaged)
        return None
    done = 0
    for meta in (Path(out) / META).glob("part-*.json"):
        if not re.fullmatch(r"part-[0-9]{6,}", meta.stem):
            continue
        try:
            json.loads(meta.read_text())["rows"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        # the chunk's points, not its rows plus its skipped counts: with invalid="keep" the
        # rows hold the skipped points too (20 of 30 points done had said 30 of 30)
        done += max(0, chunk_len(int(meta.stem[5:]), size, total))
    return min(done, total), total


def read_manifest(path: Path) -> dict:
    """A sweep's ``manifest.json``, checked: ``ScheduleError`` if it is damaged."""
    try:
        manifest = json.loads(path.read_text())
        ok = (isinstance(manifest, dict)
              and all(type(manifest.get(k)) is int for k in ("points", "chunk_size"))
              and manifest["points"] >= 0 and manifest["chunk_size"] >= 1
              and manifest.get("format") in ("parquet", "csv"))
    except (OSError, ValueError) as error:  # unreadable, or not JSON (JSONDecodeError)
        raise ScheduleError(f"out's {META}/manifest.json is damaged ({error}); remove the "
                            f"folder {str(path.parent.parent)!r} to start the sweep again") \
            from error
    if not ok:
        raise ScheduleError(f"out's {META}/manifest.json is damaged (got {manifest!r:.200}); "
                            f"remove the folder {str(path.parent.parent)!r} to start the "
                            "sweep again")
    return manifest


def _manifest(fingerprint: str, total: int, chunk_size: int) -> dict:
    """What a sweep's manifest says of it (its parts' format aside)."""
    return {"fingerprint": fingerprint, "points": total, "chunk_size": chunk_size,
            "version": __version__, "code": code_identity()}


def _held(folder: Path, manifest: dict, resume: bool) -> dict | None:
    """The manifest of the sweep ``folder`` holds (None: a new or empty folder, or one that
    holds only an empty store folder), if this sweep may continue it; else the
    ``ScheduleError`` that says why."""
    path = folder / META / "manifest.json"
    if path.exists():
        old = read_manifest(path)
        if not resume:
            raise ScheduleError(f"out {str(folder)!r} already holds a sweep; pass "
                                "resume=True to continue it or choose another folder")
        other = _other_code(old, manifest)
        if other is not None:
            raise ScheduleError(f"resume=True needs the fastpp that started the sweep in "
                                f"out={str(folder)!r} ({other}): start afresh (delete the "
                                f"folder, or choose another out), or resume with that version")
        if {k: old.get(k) for k in manifest} != manifest:
            raise ScheduleError(f"resume=True needs the arguments that the sweep in "
                                f"out={str(folder)!r} was started with: it holds a different "
                                f"sweep ({_differs(old, manifest)})")
        return old
    empty = folder / META  # (a store folder a refused sweep left empty is no other file)
    if folder.exists() and any(x != empty or not x.is_dir() or any(x.iterdir())
                               for x in folder.iterdir()):
        raise ScheduleError(f"out must be a new or empty folder, or a fastpp sweep's (got "
                            f"{str(folder)!r}, which holds other files)")
    return None


def _usable(folder: Path) -> Path:
    """``folder`` if the OS can look it up (a NUL byte or a name too long raised Python's
    ValueError or OSError from the first use)."""
    try:
        os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):  # a new folder; a file as a parent, named
        pass  # where the folder is made
    except (OSError, ValueError) as error:
        raise ScheduleError(f"out must be a folder path the OS can use (got "
                            f"{str(folder)[:80]!r}: {getattr(error, 'strerror', None) or error})"
                            ) from None
    return folder


def _digest(path: Path) -> str:
    """A part file's bytes, digested."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Lock:
    """``folder`` taken by this process for as long as it writes there: ``path`` holds its pid
    and host, locked with ``flock``, which the system lets go when the process ends however it
    ends (a stale file is no lock). Another process's hold is a ``ScheduleError``. Where the
    file cannot be made (a read-only folder, which no one writes to) or ``flock`` is missing
    (Windows, file systems that refuse it), nothing is held."""

    def __init__(self, path: Path, folder: Path):
        self.path, self.fd = path, None
        try:
            import fcntl
        except ImportError:
            return
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:  # read-only: writing fails where it is tried, and says so
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)  # no flock on this file system (Lustre without -o flock,
                    return        # some FUSE mounts): nothing is held, as on Windows
                holder = os.read(fd, 200).decode(errors="replace").split()
                os.close(fd)
                pid = holder[0] if holder else "?"
                host = f" on {holder[1]}" if len(holder) > 1 and holder[1] != socket.gethostname() \
                    else ""
                raise ScheduleError(f"out={str(folder)!r} is in use by process {pid}{host}; "
                                    "wait for it or choose another out") from None
            try:  # the file locked is still the one at path (not one its holder removed)
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # (while held: a process waiting sees it gone)
            os.close(self.fd)
            self.fd = None


def clear(folder) -> None:
    """Empty a sweep's ``folder`` for a fresh run, holding its lock while deleting: a sweep
    running there is refused (``Lock``'s ``ScheduleError``), never deleted under it."""
    folder = Path(folder)
    lock = Lock(folder / META / "lock", folder)
    try:
        for entry in [*folder.iterdir(), *(folder / META).iterdir()]:
            if entry == folder / META or entry == lock.path:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)
    finally:
        lock.release()


def read_csv(path):
    """A part written as CSV, as it was written: the exact floats, and ``reason``'s empty
    strings (a row simulated) as strings, which CSV's reader takes for missing values (a
    kept sweep's valid rows came back NaN, ``df[df.reason == ""]`` empty)."""
    import pandas as pd

    frame = pd.read_csv(path, float_precision="round_trip")
    if "reason" in frame:
        frame["reason"] = frame["reason"].fillna("").astype(str)
    return frame
