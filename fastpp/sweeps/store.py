"""A sweep's ``out`` folder: a Parquet dataset that pandas, DuckDB and Dask open as it is.

Chunk ``c`` is ``out/part-c.parquet`` (``.csv`` without pyarrow); what resuming needs sits in
``out/_fastpp/``, which the readers skip (a leading underscore): ``manifest.json`` naming the
sweep and ``part-c.json`` with the chunk's row count and skipped points. Each file is written
through a temporary file (a leading dot, also skipped) and renamed, the JSON last. A chunk
counts as done only when both exist and the part reads back with that row count, so a sweep
killed at any moment, or a file damaged on disk, costs at most a recomputation. A chunk with
no rows (all its points skipped) has no part file.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

from ..checks import ScheduleError, file_path, require

META = "_fastpp"


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


class Store:
    """The folder of one sweep; raises ``ScheduleError`` if ``folder`` holds anything else."""

    def __init__(self, folder, fingerprint: str, total: int, chunk_size: int, resume: bool):
        if not isinstance(folder, str | os.PathLike) or not str(folder):
            # '' would be Path('.'): the working directory, never what was meant
            raise ScheduleError(f"out must be a folder path (got {folder!r})")
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise ScheduleError(f"out must be a folder (got the file {str(folder)!r})")
        try:
            import pyarrow  # noqa: F401

            fmt = "parquet"
        except ImportError:
            fmt = "csv"
        manifest = {"fingerprint": fingerprint, "points": total, "chunk_size": chunk_size}
        path = folder / META / "manifest.json"
        if path.exists():
            old = read_manifest(path)
            if not resume:
                raise ScheduleError(f"out {str(folder)!r} already holds a sweep; pass "
                                    "resume=True to continue it or choose another folder")
            if {k: old.get(k) for k in manifest} != manifest:
                raise ScheduleError(f"out {str(folder)!r} holds a different sweep (other "
                                    "points or chunk size); resume needs the same arguments")
            fmt = old["format"]
        elif folder.exists() and any(folder.iterdir()):
            raise ScheduleError(f"out must be a new or empty folder, or a fastpp sweep's (got "
                                f"{str(folder)!r}, which holds other files)")
        try:
            (folder / META).mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a parent that is a file, a read-only or missing mount
            raise ScheduleError(f"out must be a folder that can be made and written (got "
                                f"{str(folder)!r}: {error.strerror or error})") from None
        manifest["format"] = fmt
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)))
        self.folder, self.format = folder, fmt

    def _part(self, c: int) -> Path:
        return self.folder / f"part-{c:06d}.{self.format}"

    def _meta(self, c: int) -> Path:
        return self.folder / META / f"part-{c:06d}.json"

    def has(self, c: int) -> bool:
        """Is chunk ``c`` complete on disk? A damaged chunk is removed, to be recomputed."""
        try:
            rows = json.loads(self._meta(c).read_text())["rows"]
            if rows == 0:
                ok = not self._part(c).exists()
            elif self.format == "parquet":
                import pyarrow.parquet as pq

                ok = pq.read_metadata(self._part(c)).num_rows == rows
            else:
                ok = len(self.read(c)) == rows
        except Exception:  # missing, truncated or garbled
            ok = False
        if not ok:
            self._part(c).unlink(missing_ok=True)
            self._meta(c).unlink(missing_ok=True)
        return ok

    def write(self, c: int, frame, skipped: dict[str, int]) -> None:
        if len(frame) and self.format == "parquet":
            atomic_write(self._part(c), lambda tmp: frame.to_parquet(tmp, index=False))
        elif len(frame):
            atomic_write(self._part(c), lambda tmp: frame.to_csv(tmp, index=False))
        meta = json.dumps({"rows": len(frame), "skipped": skipped})
        atomic_write(self._meta(c), lambda tmp: tmp.write_text(meta))

    def read(self, c: int):
        """Chunk ``c``'s rows (``None`` for a chunk without rows)."""
        import pandas as pd

        path = self._part(c)
        if not path.exists():
            return None
        if self.format == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, float_precision="round_trip")  # the exact floats written

    def skipped(self, c: int) -> dict[str, int]:
        return json.loads(self._meta(c).read_text())["skipped"]


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

    folder = file_path(out, "out")
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
                      if re.fullmatch(r"part-[0-9]{6}", m.stem)})
    for c in (c for c in written if c < chunks):
        meta = folder / META / f"part-{c:06d}.json"
        part = folder / f"part-{c:06d}.{manifest['format']}"
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):  # not finished yet
            continue
        try:
            if info["rows"]:
                frame = (pd.read_parquet(part) if manifest["format"] == "parquet" else
                         pd.read_csv(part, float_precision="round_trip"))
                # a part of another table (or cut short) reads fine: its rows and columns tell
                lacking = [k for k in ("point", "schedule", "makespan") if k not in frame]
                if len(frame) != info["rows"] or lacking:
                    raise ValueError(f"{len(frame)} rows of {info['rows']}, lacking {lacking}")
                frames.append(frame)
            for reason, count in info["skipped"].items():
                reasons[reason] = reasons.get(reason, 0) + int(count)
        except Exception as error:  # pyarrow's ArrowInvalid, pandas' ParserError, a bad key
            raise ScheduleError(f"out {str(folder)!r} has a damaged chunk {c} ({part.name} or "
                                f"{META}/{meta.name}: {type(error).__name__}); run the sweep "
                                "again with resume=True to recompute it") from error
        done += 1
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    df.attrs.update(skipped=sum(reasons.values()), skip_reasons=SkipReasons(reasons),
                    complete=done == chunks)
    return df


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


def atomic_write(path: Path, write) -> None:
    """Write through a temporary file and rename it, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
