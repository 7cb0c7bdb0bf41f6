"""Attacks on the promise of the reference's clock (`sample_book.Clock`, judge version 7):
the ledger alone gives every sample the live evaluator stamped, in the order it stamped
them, so that `verify` finds nothing on an honest ledger and a resumed campaign starts from
the book the uninterrupted one has. Real engine, real git, real subprocess metric runs.

Each test ends the live run, then compares the engine's own sample book (what its next
comparison would start from) with one rebuilt from the ledger by `SampleBook.load` (what a
resumed campaign and `verify` start from), and runs `verify` on the ledger.
"""

from __future__ import annotations

from pathlib import Path

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.stats.sample_book import SampleBook
from autoresearch.store.ledger import Ledger
from campaigns import script_campaign

# A noisy metric (sigma 0.3 around N); its runs on the code whose N is `kill` kill
# themselves with SIGKILL, as another process would; on `crash`, the `crash_at`-th run of
# that code (and every later one) exits 1.
NOISY = """import calc, os, random, signal, sys
folder = {folder!r}
state = os.path.join(folder, "count")
count = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(count + 1))
if calc.N == {kill}:
    os.kill(os.getpid(), signal.SIGKILL)
if calc.N == {crash}:
    mark = os.path.join(folder, "crash")
    runs = int(open(mark).read()) if os.path.exists(mark) else 0
    open(mark, "w").write(str(runs + 1))
    if runs + 1 >= {crash_at}:
        sys.exit(1)
print(calc.N + random.Random(count).gauss(0, 0.3))
"""


def noisy_campaign(
    tmp_path: Path,
    script: str,
    *,
    kill: float = -1,
    crash: float = -1,
    crash_at: int = 1,
    **extra: object,
) -> Path:
    folder = tmp_path / "noise"
    folder.mkdir()
    bench = NOISY.format(folder=str(folder), kill=kill, crash=crash, crash_at=crash_at)
    return script_campaign(
        tmp_path,
        script,
        bench=bench,
        files={"calc.py": "N = 10\n"},
        **{  # type: ignore[arg-type]
            "decision.rule": "sequential",
            "decision.max_samples": 6,
            "sandbox.writable": [str(folder)],
            **extra,
        },
    )


def state_dir(repo: Path) -> Path:
    return repo / ".autoresearch" / "t"


def rebuilt(engine: Engine, records: list[AttemptRecord]) -> SampleBook:
    assert engine.evaluator is not None
    live = engine.evaluator.book
    book = SampleBook(live.configured, live.direction)
    book.load(records)
    return book


def assert_same_book(engine: Engine, records: list[AttemptRecord]) -> None:
    """The book a resumed campaign loads is the one the live campaign ended with."""
    assert engine.evaluator is not None
    live = engine.evaluator.book
    book = rebuilt(engine, records)
    best = [r for r in records if r.status.sets_best][-1].commit
    assert best is not None
    assert book.reference(best) == live.reference(best)
    assert book.groups == live.groups
    assert book.clock.times == live.clock.times
    assert book.clock.now == live.clock.now
    assert (book.selected, book.own) == (live.selected, live.own)


# -- sequential: what the live clock counts, the ledger holds ---------------------------

# 1: a clear gain (kept); 2: a candidate a metric run of which crashes after the comparison
# has begun (its samples cut short); 3: a gain the guard refuses; 4: a file out of scope;
# 5: no change at all; 6 and on: neutral.
MIXED = r"""
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 5/' calc.py;;
  2) sed -i 's/^N = .*/N = 5.05/' calc.py;;
  3) sed -i 's/^N = .*/N = 3/' calc.py;;
  4) echo x > outside.txt;;
  5) ;;
  *) echo "# neutral $AUTORESEARCH_ITERATION" >> calc.py;;
esac
"""


def test_cut_short_guard_failed_scope_and_no_change_records_rebuild_the_live_clock(
    tmp_path: Path,
) -> None:
    """A comparison cut short by a crashed run (after runs of both sides were taken), a
    candidate the rule kept and the guard refused, a scope violation and an attempt with no
    change: every sample the live evaluator stamped is in the ledger, in the order it was
    stamped, and `verify` finds nothing."""
    repo = noisy_campaign(
        tmp_path,
        MIXED,
        crash=5.05,
        crash_at=2,
        guard={"command": "python -c 'import calc; assert calc.N != 3'"},
        **{"stop.max_iterations": 8},
    )
    engine = Engine(load_campaign(repo))
    result = engine.run()
    assert result.exit_code == 0, result.message
    records = Ledger(state_dir(repo)).read()
    statuses = [r.status for r in records]
    assert statuses[:6] == [
        Status.BASELINE,
        Status.KEEP,
        Status.CRASH,
        Status.GUARD_FAILED,
        Status.SCOPE_VIOLATION,
        Status.NO_CHANGE,
    ], statuses
    crashed = records[2]
    # Cut short after the comparison took runs of both sides.
    assert crashed.samples and crashed.incumbent_samples, crashed
    assert_same_book(engine, records)
    report = verify_campaign(repo, state_dir(repo), "t")
    assert report.ok, report.problems


# -- sequential: a run killed from outside twice -----------------------------------------

# 1: a clear gain (kept, so the next comparison re-measures the incumbent first); 2: a
# candidate every metric run of which is killed from outside; 3 and on: neutral.
KILLED = r"""
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 5/' calc.py;;
  2) sed -i 's/^N = .*/N = 4/' calc.py;;
  *) echo "# neutral $AUTORESEARCH_ITERATION" >> calc.py;;
esac
"""


def killed_campaign(tmp_path: Path) -> tuple[Engine, Path, list[AttemptRecord]]:
    repo = noisy_campaign(tmp_path, KILLED, kill=4, **{"stop.max_iterations": 3})
    engine = Engine(load_campaign(repo))
    result = engine.run()
    assert result.exit_code == 0, result.message
    records = Ledger(state_dir(repo)).read()
    assert [r.status for r in records][:3] == [Status.BASELINE, Status.KEEP, Status.INTERRUPTED]
    killed = records[2]
    assert killed.reason and "SIGKILL" in killed.reason, killed
    # The incumbent was re-measured before the candidate's run was killed, twice.
    assert killed.incumbent_samples and not killed.samples, killed
    return engine, repo, records


def test_a_comparison_ended_by_outside_kills_rebuilds_the_live_clock(tmp_path: Path) -> None:
    """The incumbent runs taken before the candidate's run was killed twice count on the
    live clock and in the reference; the ledger keeps them, so a resumed campaign has them
    too."""
    engine, _, records = killed_campaign(tmp_path)
    assert_same_book(engine, records)


def test_verify_accepts_a_comparison_ended_by_outside_kills(tmp_path: Path) -> None:
    _, repo, _ = killed_campaign(tmp_path)
    report = verify_campaign(repo, state_dir(repo), "t")
    assert report.ok, report.problems


# -- parallel: a winner measured against a replaced incumbent ----------------------------

# B alone scores 8, A alone 9, both together 15 (the noise is 0.3): B lands first and is
# kept; A, a winner against the baseline too, is set aside, merged onto B (15: not kept)
# and measured again alone (9: not kept either). B stays the incumbent.
INTERACT = """import calc, os, random
folder = {folder!r}
state = os.path.join(folder, "count")
count = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(count + 1))
a, b = calc.A, calc.B
print(10 - a - 2 * b + 8 * a * b + random.Random(count).gauss(0, 0.3))
"""
B_FIRST = """if [ "$AUTORESEARCH_ITERATION" = 1 ]; then sed -i "s/^B = 0/B = 1/" calc.py; fi
if [ "$AUTORESEARCH_ITERATION" = 2 ]; then sleep 3; sed -i "s/^A = 0/A = 1/" calc.py; fi
"""


def test_a_set_aside_winner_leaves_nothing_in_the_book_the_ledger_does_not_hold(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "noise"
    folder.mkdir()
    repo = script_campaign(
        tmp_path,
        B_FIRST,
        bench=INTERACT.format(folder=str(folder)),
        files={"calc.py": "A = 0\n\n#\n\nB = 0\n"},
        **{  # type: ignore[arg-type]
            "decision.rule": "sequential",
            "decision.max_samples": 6,
            "sandbox.writable": [str(folder)],
        },
    )
    engine = Engine(load_campaign(repo), jobs=2, max_iterations=2)
    result = engine.run()
    assert result.exit_code == 0, result.message
    records = Ledger(state_dir(repo)).read()
    assert len(records) == 3, [(r.iteration, r.status) for r in records]
    first, later = records[1], records[2]
    assert first.status is Status.KEEP and first.iteration == 1, first
    # Measured against the baseline, then set aside and measured again (merged, alone).
    assert later.parent == first.commit, later
    assert later.note and "measured again alone" in later.note, later
    # Both comparisons before the last are in its record: against the baseline, merged.
    assert [e.parent for e in later.earlier] == [records[0].commit, first.commit], later
    # Every run the attempt cost is in its count, the set-aside comparisons' too.
    runs = [len(c.samples or ()) + len(c.incumbent_samples or ()) for c in [*later.earlier, later]]
    assert later.metric_runs == sum(runs), (later.metric_runs, runs)
    assert verify_campaign(repo, state_dir(repo), "t").ok
    assert_same_book(engine, records)


# 1: a clear gain the rule keeps, whose guard run is killed from outside, twice.
GUARD_KILLED = r"""
case "$AUTORESEARCH_ITERATION" in
  1) sed -i 's/^N = .*/N = 3/' calc.py;;
  *) echo "# neutral $AUTORESEARCH_ITERATION" >> calc.py;;
esac
"""
KILL_GUARD = "python -c 'import calc, os, signal; calc.N == 3 and os.kill(os.getpid(), 9)'"


def test_verify_accepts_a_keep_whose_guard_was_killed_from_outside(tmp_path: Path) -> None:
    repo = noisy_campaign(
        tmp_path, GUARD_KILLED, guard={"command": KILL_GUARD}, **{"stop.max_iterations": 2}
    )
    engine = Engine(load_campaign(repo))
    result = engine.run()
    assert result.exit_code == 0, result.message
    records = Ledger(state_dir(repo)).read()
    killed = records[1]
    assert killed.status is Status.INTERRUPTED and killed.samples, killed
    assert killed.reason and "guard" in killed.reason, killed
    assert_same_book(engine, records)
    report = verify_campaign(repo, state_dir(repo), "t")
    assert report.ok, report.problems
