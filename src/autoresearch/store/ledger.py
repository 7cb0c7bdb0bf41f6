"""The append-only attempt ledger (`ledger.jsonl`), `results.tsv`, and the campaign state file."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoresearch.attempt import AttemptRecord
from autoresearch.errors import AutoresearchError
from autoresearch.isolation.owned import append_own

TSV_HEADER = "iteration\tcommit\tmetric\tdelta\tstatus\tdescription\n"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str, durable: bool = True) -> None:
    """Replace `path` in one step; with `durable`, the content is on disk first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _identity(path: Path) -> tuple[int, int, int] | None:
    """What changes whenever anyone writes or replaces the file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def encode_line(line: str) -> bytes:
    """A JSON line as UTF-8. A file name that is not UTF-8 reaches us as lone surrogates
    (`surrogateescape`), which UTF-8 cannot hold; JSON can, as `\\udcff` escapes, and they
    read back as the same string. They only occur inside JSON strings, so the escape is
    always a string escape."""
    return (line + "\n").encode("utf-8", errors="backslashreplace")


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.10g}"


def stored_object(record: AttemptRecord) -> dict[str, Any]:
    """The record as its ledger line holds it, `prev_hash` included (what `log --json`,
    `show --json` and the dashboard serve)."""
    return {**record.to_json(), "prev_hash": record.prev_hash}


class Ledger:
    """One JSON object per line; every append is flushed and fsynced before returning."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.path = state_dir / "ledger.jsonl"
        self.tsv_path = state_dir / "results.tsv"
        self.torn_path = state_dir / "ledger.torn"
        # The file as this object's last append left it, and the hash of that line: the
        # next append chains to it without reading the whole ledger again.
        self._tail: tuple[tuple[int, int, int], str] | None = None

    def read(self) -> list[AttemptRecord]:
        """Every complete record, typed. Reading stops at a line that is not JSON (a torn
        write that `repair` has not moved aside yet)."""
        out: list[AttemptRecord] = []
        for number, line in enumerate(self._lines(), 1):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                break
            if not isinstance(data, dict):
                continue
            try:
                out.append(AttemptRecord.from_json(data))
            except (TypeError, ValueError):
                raise AutoresearchError(
                    f"{self.path} line {number} is not an attempt record (edited by hand?); "
                    "`autoresearch verify` names what is wrong with it."
                ) from None
        return out

    def _lines(self) -> list[str]:
        try:
            data = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return [line for line in data.split("\n") if line.strip()]

    def repair(self) -> str | None:
        """Move a torn last line (a write cut short by a crash) aside; say what was done."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if not data:
            return None
        body, _, last = data.rstrip(b"\n").rpartition(b"\n")
        complete = data.endswith(b"\n")
        try:
            json.loads(last)
            if complete:
                return None
            with append_own(self.path, "ledger") as handle:
                handle.write(b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
        with append_own(self.torn_path) as handle:
            handle.write(last + b"\n")
        keep = body + b"\n" if body else b""
        write_atomic(self.path, keep.decode("utf-8", errors="surrogateescape"))
        return f"a torn last line of {self.path.name} was moved to {self.torn_path.name}"

    def last_hash(self) -> str | None:
        if self._tail is not None and self._tail[0] == _identity(self.path):
            return self._tail[1]
        lines = self._lines()
        return line_hash(lines[-1]) if lines else None

    def append(self, record: AttemptRecord) -> AttemptRecord:
        """Append one record, chained to the last line; returns it as stored (`prev_hash` set)."""
        stored = replace(record, prev_hash=self.last_hash())
        self._write(stored_object(stored), stored)
        return stored

    def _write(self, data: dict[str, Any], record: AttemptRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        line = json.dumps(data, ensure_ascii=False, sort_keys=False, allow_nan=False)
        raw = encode_line(line)
        with append_own(self.path, "ledger") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
            st = os.fstat(handle.fileno())
        # The hash of the line as it reads back (the bytes written, which are UTF-8).
        written = hashlib.sha256(raw[:-1]).hexdigest()
        self._tail = ((st.st_ino, st.st_size, st.st_mtime_ns), written)
        self._append_tsv(record)

    def _append_tsv(self, record: AttemptRecord) -> None:
        new = not self.tsv_path.is_file() or self.tsv_path.is_symlink()
        description = " ".join(record.description.replace("\0", " ").split())
        row = "\t".join(
            [
                str(record.iteration),
                (record.commit or "")[:12],
                _fmt(record.metric),
                _fmt(record.delta),
                str(record.status),
                description,
            ]
        )
        # results.tsv is derived from the ledger (which is fsynced): flushing suffices.
        text = (TSV_HEADER if new else "") + row + "\n"
        with append_own(self.tsv_path) as handle:
            handle.write(text.encode("utf-8", errors="backslashreplace"))
        if new:
            _fsync_dir(self.dir)


class StateFile:
    """`state.json`: what the engine is doing now, readable while it runs."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "state.json"
        self._staged: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def stage(self, **fields: Any) -> None:
        """Merge `fields` in with the next `update`, which is due at once: one write
        instead of two (each is a new file renamed into place)."""
        self._staged.update(fields)

    def update(self, durable: bool = True, **fields: Any) -> dict[str, Any]:
        """Merge `fields` in. Progress updates pass durable=False: losing one to a power
        cut costs nothing, and they come several times per attempt."""
        data = self.read()
        data.update(self._staged)
        data.update(fields)
        self._staged = {}
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", durable)
        return data
