"""The ledger stores and reads typed records; a ledger written by 0.1.0 is read unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.store.ledger import Ledger, StateFile, line_hash, stored_object

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ledger_v1"


@pytest.mark.parametrize("name", ["ledger.jsonl", "toy_full.jsonl", "sequential.jsonl"])
def test_an_old_ledger_written_back_is_the_same_file(tmp_path: Path, name: str) -> None:
    old = tmp_path / "old"
    old.mkdir()
    text = (FIXTURES / name).read_text(encoding="utf-8")
    (old / "ledger.jsonl").write_text(text, encoding="utf-8")
    records = Ledger(old).read()
    assert len(records) == len(text.splitlines())
    again = Ledger(tmp_path / "new")
    for record in records:
        stored = again.append(record)
        assert stored == record  # the same chain: each prev_hash comes out as it was
    assert again.path.read_text(encoding="utf-8") == text
    assert [json.dumps(stored_object(r), ensure_ascii=False) for r in records] == (
        text.splitlines()
    )


def test_append_chains_lines_and_writes_results_tsv(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    first = ledger.append(
        AttemptRecord(0, Status.BASELINE, metric=1.0, commit="c" * 40, description="a\tb")
    )
    second = ledger.append(AttemptRecord(1, Status.KEEP, metric=0.5, closed=True, delta=-0.5))
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert first.prev_hash is None and json.loads(lines[0])["prev_hash"] is None
    assert second.prev_hash == line_hash(lines[0]) == json.loads(lines[1])["prev_hash"]
    assert ledger.last_hash() == line_hash(lines[1])
    assert ledger.read() == [first, second]
    tsv = (tmp_path / "results.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["iteration", "commit", "metric", "delta", "status", "description"]
    assert tsv[1].split("\t") == ["0", "c" * 12, "1", "", "baseline", "a b"]
    assert tsv[2].split("\t") == ["1", "", "0.5", "-0.5", "keep", ""]


def test_reading_stops_at_a_torn_line_which_repair_moves_aside(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append(AttemptRecord(0, Status.BASELINE, metric=1.0))
    with open(ledger.path, "a") as handle:
        handle.write('{"iteration": 1, "sta')
    assert [r.iteration for r in ledger.read()] == [0]
    message = ledger.repair()
    assert message and "ledger.torn" in message
    assert (tmp_path / "ledger.torn").read_text() == '{"iteration": 1, "sta\n'
    assert ledger.repair() is None
    ledger.append(AttemptRecord(1, Status.DISCARD))
    assert [r.status for r in ledger.read()] == [Status.BASELINE, Status.DISCARD]


def test_a_missing_ledger_reads_as_empty(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "none")
    assert ledger.read() == [] and ledger.last_hash() is None and ledger.repair() is None


def test_state_file_merges_fields(tmp_path: Path) -> None:
    state = StateFile(tmp_path)
    assert state.read() == {}
    state.update(phase="proposing", iteration=3)
    state.update(durable=False, phase="measuring")
    assert state.read() == {"phase": "measuring", "iteration": 3}
    state.path.write_text("[1, 2]")
    assert state.read() == {}
