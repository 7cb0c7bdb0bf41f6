"""Several candidates in flight (`[executor] jobs`): real git, real subprocesses.

The promises attacked here: a winner measured against an incumbent that was replaced since
is never kept on that evidence; winners that do not conflict are combined and the
combination is kept only when it beats the incumbent; every attempt is logged once; the
ledger verifies; slots get their own GPUs.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from autoresearch.attempt import AttemptRecord, Status
from autoresearch.checks.verify import verify_campaign
from autoresearch.config import load_campaign
from autoresearch.engine import Engine
from autoresearch.engine.slots import lost_in_slots
from autoresearch.errors import ConfigError
from autoresearch.events import Event, PhaseChanged
from autoresearch.store.ledger import Ledger
from autoresearch.testing.repo import git
from autoresearch.views.status import campaign_status
from campaigns import script_campaign

# Four independent improvements, each on its own line far enough apart to merge cleanly.
SPACED = "A = 0\n\n#\n\nB = 0\n\n#\n\nC = 0\n\n#\n\nD = 0\n"
FLIP = """L=$(python3 -c "import random; print(random.choice('ABCD'))")
sed -i "s/^$L = 0/$L = 1/" calc.py
sleep 0.2
"""
ADDITIVE = "import calc\nprint(10 - calc.A - calc.B - calc.C - calc.D)\n"


def run(repo: Path, jobs: int, **kwargs: object) -> tuple[list[AttemptRecord], list[Event]]:
    events: list[Event] = []
    result = Engine(load_campaign(repo), on_event=events.append, jobs=jobs, **kwargs).run()  # type: ignore[arg-type]
    assert result.exit_code == 0, result.message
    return Ledger(repo / ".autoresearch" / "t").read(), events


def assert_never_kept_on_stale_evidence(records: list[AttemptRecord]) -> None:
    """Every keep was measured against the incumbent of its moment: the last commit kept
    before it in the ledger, which is also its parent on the branch."""
    incumbent = records[0].commit
    for record in records[1:]:
        if record.status.sets_best:
            assert record.measured_against == incumbent, record
            assert record.parent == incumbent
            incumbent = record.commit


def test_non_conflicting_winners_are_combined_and_every_keep_is_fresh(tmp_path: Path) -> None:
    repo = script_campaign(
        tmp_path,
        FLIP,
        bench=ADDITIVE,
        files={"calc.py": SPACED},
        **{"stop.max_iterations": 8},
    )
    records, events = run(repo, jobs=3)
    assert sorted(r.iteration for r in records) == list(range(9))
    assert all(r.slot is not None for r in records[1:])
    assert_never_kept_on_stale_evidence(records)
    merged = [r for r in records if r.status is Status.MERGED]
    kept = [r for r in records if r.status.sets_best and r.iteration]
    assert kept, [r.status for r in records]
    for record in merged:
        assert record.combined and record.iteration in record.combined
        assert len(record.combined) >= 2
    # The branch holds the best, which is the sum of the kept effects.
    best = min(r.metric for r in records if r.status.sets_best and r.metric is not None)
    calc = git(repo, "show", "autoresearch/t:calc.py")
    assert 10 - sum(f"{name} = 1" in calc for name in "ABCD") == best
    report = verify_campaign(repo, repo / ".autoresearch" / "t", "t")
    assert report.ok, report.problems
    assert {e.slot for e in events if isinstance(e, PhaseChanged) and e.slot is not None} == {
        0,
        1,
        2,
    }
    # The user's checkout is untouched.
    assert (repo / "calc.py").read_text() == SPACED


# Each slot lowers N by its own amount: winners from the same incumbent conflict.
LOWER = """N=$(python3 -c "import calc; print(calc.N)")
STEP=$((1 + AUTORESEARCH_ITERATION % 3))
sed -i "s/^N = .*/N = $((N - STEP))/" calc.py
sleep 0.2
"""


def test_a_conflicting_winner_is_superseded_never_kept(tmp_path: Path) -> None:
    repo = script_campaign(tmp_path, LOWER, **{"stop.max_iterations": 4})
    records, _ = run(repo, jobs=2)
    assert_never_kept_on_stale_evidence(records)
    superseded = [r for r in records if r.status is Status.SUPERSEDED]
    assert superseded, [(r.iteration, r.status) for r in records]
    for record in superseded:
        assert record.reason and "conflicts with" in record.reason
        assert record.samples  # measured, but that evidence was against an older incumbent
    best = [r for r in records if r.status.sets_best][-1]
    assert git(repo, "rev-parse", "autoresearch/t").strip() == best.commit
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok


# Two good changes that are bad together: the combination is measured and not kept.
INTERACT = """import calc
a, b = calc.A, calc.B
print(10 - 3 * a - 2 * b + 8 * a * b)
"""
PAIR = """if [ "$AUTORESEARCH_ITERATION" = 1 ]; then sed -i "s/^A = 0/A = 1/" calc.py; fi
if [ "$AUTORESEARCH_ITERATION" = 2 ]; then sed -i "s/^B = 0/B = 1/" calc.py; fi
sleep 0.3
"""


def test_a_combination_that_does_not_beat_the_best_single_winner_is_not_kept(
    tmp_path: Path,
) -> None:
    repo = script_campaign(
        tmp_path, PAIR, bench=INTERACT, files={"calc.py": "A = 0\n\n#\n\nB = 0\n"}
    )
    records, _ = run(repo, jobs=2, max_iterations=2)
    by_iteration = {r.iteration: r for r in records}
    first, second = sorted((by_iteration[1], by_iteration[2]), key=lambda r: records.index(r))
    assert first.status is Status.KEEP
    # The second winner, merged onto the first, scores 10 - 3 - 2 + 8 = 13: worse; it was
    # then measured alone against the first, and the branch holds the better of the two.
    assert second.note and "merged onto" in second.note and "measured 13" in second.note
    assert second.measured_against == first.commit
    assert git(repo, "show", "autoresearch/t:calc.py").count("= 1") == 1
    best = [r for r in records if r.status.sets_best][-1]
    assert best.metric == 7 and git(repo, "rev-parse", "autoresearch/t").strip() == best.commit
    assert_never_kept_on_stale_evidence(records)
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok


# The weaker winner lands first: B alone scores 8, A alone 7, both together 13.
WEAK_FIRST = """if [ "$AUTORESEARCH_ITERATION" = 1 ]; then sed -i "s/^B = 0/B = 1/" calc.py; fi
if [ "$AUTORESEARCH_ITERATION" = 2 ]; then sleep 1.5; sed -i "s/^A = 0/A = 1/" calc.py; fi
"""


def test_the_best_single_winner_is_kept_when_the_gains_do_not_add_up(tmp_path: Path) -> None:
    repo = script_campaign(
        tmp_path, WEAK_FIRST, bench=INTERACT, files={"calc.py": "A = 0\n\n#\n\nB = 0\n"}
    )
    records, _ = run(repo, jobs=2, max_iterations=2)
    weak, strong = (next(r for r in records if r.iteration == i) for i in (1, 2))
    assert weak.status is Status.KEEP and weak.metric == 8
    assert strong.status is Status.KEEP and strong.metric == 7, strong
    assert strong.measured_against == weak.commit and not strong.combined
    assert strong.note and "measured 13" in strong.note and "alone" in strong.note
    calc = git(repo, "show", "autoresearch/t:calc.py")
    assert "A = 1" in calc and "B = 0" in calc
    assert git(repo, "rev-parse", "autoresearch/t").strip() == strong.commit
    assert_never_kept_on_stale_evidence(records)
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok


def test_every_slot_gets_its_own_gpus(tmp_path: Path) -> None:
    bench = "import os, calc\nprint('gpu', os.environ.get('CUDA_VISIBLE_DEVICES'))\nprint(calc.N)\n"
    repo = script_campaign(
        tmp_path,
        "sed -i 's/^N = .*/N = 9/' calc.py\nsleep 0.2\n",
        bench=bench,
        **{"executor.gpus": [4, 5, 6, 7], "stop.max_iterations": 4},
    )
    records, _ = run(repo, jobs=2)
    logs = repo / ".autoresearch" / "t" / "logs"
    seen = set()
    for record in records[1:]:
        if not record.samples:
            continue
        out = (logs / f"{record.iteration:04d}-metric-1.out").read_text()
        assert record.slot is not None
        expected = "4,5" if record.slot == 0 else "6,7"
        assert f"gpu {expected}" in out
        seen.add(record.slot)
    assert seen


def test_cores_beyond_the_machine_are_refused_in_one_sentence(tmp_path: Path) -> None:
    repo = script_campaign(tmp_path, "true\n", **{"executor.cpus_per_job": 4096})
    with pytest.raises(ConfigError, match=r"executor\.cpus_per_job"):
        Engine(load_campaign(repo), jobs=2).run()


# The proposer's try at a candidate the guard refused fixes it; a fresh attempt breaks it.
REWORKED = """if grep -q broken calc.py; then
    sed -i '/broken/d' calc.py
else
    printf 'N = 5\n# broken\n' > calc.py
fi
"""


def test_a_guard_rework_with_several_jobs_gives_the_refused_candidate_its_try(
    tmp_path: Path,
) -> None:
    repo = script_campaign(
        tmp_path,
        REWORKED,
        guard={"command": "! grep -q broken calc.py", "rework": 2},
        **{"stop.max_iterations": 4},
    )
    records, _ = run(repo, jobs=2)
    sent_back = {r.iteration for r in records if r.status is Status.REWORK}
    assert sent_back, [(r.iteration, r.status) for r in records]
    tries = [r for r in records if r.rework_of is not None]
    assert tries and all(t.rework_of in sent_back for t in tries)
    kept = [r for r in records if r.status.sets_best and r.iteration]
    assert kept and kept[0].rework_of in sent_back
    # What the branch holds passed the guard, and every keep was measured fresh.
    assert git(repo, "show", "autoresearch/t:calc.py") == "N = 5\n"
    assert_never_kept_on_stale_evidence(records)
    report = verify_campaign(repo, repo / ".autoresearch" / "t", "t")
    assert report.ok, report.problems


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("executor.jobs", 0, r"executor\.jobs"),
        ("executor.gpus", [0, 0], "twice"),
        ("executor.kind", "slurm", r"executor\.kind"),
    ],
)
def test_bad_executor_settings_are_refused(
    tmp_path: Path, key: str, value: object, words: str
) -> None:
    repo = script_campaign(tmp_path, "true\n", **{key: value})
    with pytest.raises(ConfigError, match=words):
        load_campaign(repo)


def test_attempts_in_flight_in_a_dead_engine_are_logged_once() -> None:
    base = AttemptRecord(0, Status.BASELINE, metric=1.0, commit="a" * 40)
    known = AttemptRecord(
        3, Status.INTERRUPTED, commit="b" * 40, parent="a" * 40, description="x"
    ).to_json()
    state = {
        "slots": {
            "0": {"iteration": 2, "phase": "proposing", "record": None},
            "1": {"iteration": 3, "phase": "measuring", "record": known},
            "2": {"iteration": 1, "phase": "measuring", "record": None},
            "3": {"iteration": None, "phase": "idle", "record": None},
        }
    }
    done = [base, AttemptRecord(1, Status.DISCARD)]
    lost = lost_in_slots(state, done)
    assert [(r.iteration, r.status, r.slot) for r in lost] == [
        (2, Status.INTERRUPTED, 0),
        (3, Status.INTERRUPTED, 1),
    ]
    assert lost[1].commit == "b" * 40 and lost[1].description == "x"


def test_status_shows_every_slot_of_a_running_engine(tmp_path: Path) -> None:
    repo = script_campaign(tmp_path, "true\n")
    state = repo / ".autoresearch" / "t"
    records, _ = run(repo, jobs=2, max_iterations=1)
    assert records
    from autoresearch.store.ledger import StateFile

    StateFile(state).update(
        slots={
            "0": {"iteration": 7, "phase": "measuring", "started_utc": "2026-01-01T00:00:00Z"},
            "1": {"iteration": None, "phase": "idle", "started_utc": None},
        }
    )
    from autoresearch.views.status import slot_status

    shown = slot_status(StateFile(state).read()["slots"])
    assert shown[0]["slot"] == 0 and shown[0]["iteration"] == 7
    assert shown[0]["phase"] == "measuring" and shown[0]["elapsed_seconds"] > 0
    assert shown[1]["iteration"] is None
    assert campaign_status(state)["slots"] == []  # not running: nothing in flight
    # While an engine holds the lock, `status --json` and the dashboard's api/status show
    # the slots.
    from filelock import FileLock

    with FileLock(str(state / "engine.lock")):
        slots = campaign_status(state)["slots"]
    assert [s["iteration"] for s in slots] == [7, None]
    from autoresearch.views.dashboard import page

    assert 'id="slots"' in page() and "status.slots" in page()


OPTUNA = """\
name = "t"
scope = ["calc.py"]
harness = ["bench.py"]
[metric]
command = "python bench.py"
direction = "minimize"
[stop]
max_iterations = 9
[executor]
jobs = 3
[proposer]
kind = "optuna"
seed = 1
startup_trials = 2
[proposer.space]
"calc.py:N" = {{ low = 0, high = 3 }}
"calc.py:M" = {{ choices = [0, 1, 2] }}
"""


def test_optuna_asks_several_trials_at_once_and_hears_every_one(tmp_path: Path) -> None:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from campaigns import make_repo

    bench = "import calc, time\ntime.sleep(0.3)\nprint(abs(calc.N - 2) + calc.M)\n"
    repo = make_repo(
        tmp_path / "repo",
        {"calc.py": "N = 0\nM = 2\n", "bench.py": bench, "autoresearch.toml": OPTUNA.format()},
    )
    records, _ = run(repo, jobs=3)
    attempts = [r for r in records if r.iteration]
    assert len({r.slot for r in attempts}) > 1  # trials really were in flight together
    points = (
        [(r.params or {}).get("calc.py:N") for r in attempts],
        [(r.params or {}).get("calc.py:M") for r in attempts],
    )
    asked = list(zip(*points, strict=True))
    assert len(set(asked)) == len(asked), asked  # no point asked twice, even in flight together
    path = repo / ".autoresearch" / "t" / "optuna.journal"
    study = optuna.load_study(study_name="t", storage=JournalStorage(JournalFileBackend(str(path))))
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states  # every trial told back
    assert len(study.trials) == len(attempts) + 1  # and the baseline


SPAN = """import calc, os, time
began = time.time()
time.sleep(0.3)
with open(os.path.join({spans!r}, os.urandom(8).hex()), "w") as f:
    f.write(f"{{began}} {{time.time()}}")
print(calc.N, sorted(os.sched_getaffinity(0)))
"""


@pytest.mark.parametrize("key", ["metric.exclusive", "executor.measure_jobs"])
def test_an_exclusive_metric_is_never_measured_beside_another(tmp_path: Path, key: str) -> None:
    spans = tmp_path / "spans"
    spans.mkdir()
    value: object = True if key == "metric.exclusive" else 1
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((20 - AUTORESEARCH_ITERATION))/" calc.py\n',
        bench=SPAN.format(spans=str(spans)),
        **{
            key: value,
            "metric.pattern": r"^(\d+)",
            "stop.max_iterations": 5,
            "sandbox.writable": [str(spans)],
        },
    )
    records, _ = run(repo, jobs=3)
    assert len({r.slot for r in records if r.iteration}) > 1
    intervals = sorted(tuple(float(x) for x in p.read_text().split()) for p in spans.iterdir())
    assert len(intervals) >= 5
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert start >= end, intervals


def test_each_slot_runs_on_its_own_cores(tmp_path: Path) -> None:
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    spans = tmp_path / "spans"
    spans.mkdir()
    repo = script_campaign(
        tmp_path,
        'sed -i "s/^N = .*/N = $((20 - AUTORESEARCH_ITERATION))/" calc.py\n',
        bench=SPAN.format(spans=str(spans)),
        **{
            "executor.cpus_per_job": 1,
            "metric.pattern": r"^(\d+)",
            "stop.max_iterations": 4,
            "sandbox.writable": [str(spans)],
        },
    )
    records, _ = run(repo, jobs=2)
    logs = repo / ".autoresearch" / "t" / "logs"
    cores: dict[int, set[str]] = {}
    for record in records[1:]:
        if record.samples and record.slot is not None:
            out = (logs / f"{record.iteration:04d}-metric-1.out").read_text()
            cores.setdefault(record.slot, set()).add(out.split(" ", 1)[1].strip())
    assert all(len(seen) == 1 for seen in cores.values()), cores
    pinned = [next(iter(seen)) for seen in cores.values()]
    assert len(set(pinned)) == len(pinned)  # no two slots share a core
    assert all(p.count(",") == 0 for p in pinned)  # one core each


# Attempt 2 edits the judge; the others make plain changes (attempt 3 out of scope).
RULE_BREAKER = """case "$AUTORESEARCH_ITERATION" in
  2) sleep 2; echo "print(0)" > bench.py;;
  3) echo hi > notes.txt;;
  *) sed -i "s/^N = .*/N = $((10 - AUTORESEARCH_ITERATION))/" calc.py; sleep 0.5;;
esac
"""


def test_scope_and_tamper_rules_hold_in_every_slot(tmp_path: Path) -> None:
    repo = script_campaign(tmp_path, RULE_BREAKER, **{"stop.max_iterations": 6})
    result = Engine(load_campaign(repo), jobs=3).run()
    assert result.exit_code == 3 and result.stop_reason == "tampered"
    records = Ledger(repo / ".autoresearch" / "t").read()
    by_iteration = {r.iteration: r for r in records}
    assert by_iteration[2].status is Status.TAMPERED
    assert by_iteration[3].status is Status.SCOPE_VIOLATION
    # Neither kept anything nor left its content under a ref.
    for bad in (2, 3):
        ref = f"refs/autoresearch/t/{bad}"
        assert subprocess.run(["git", "rev-parse", "-q", "--verify", ref], cwd=repo).returncode
    assert "print(0)" not in git(repo, "show", "autoresearch/t:bench.py")
    assert "notes.txt" not in git(repo, "ls-tree", "-r", "--name-only", "autoresearch/t")
    # Every attempt that started is logged once; nothing started after the halt.
    started = sorted(by_iteration)
    assert started == list(range(len(started))) and len(started) == len(records)
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok


def test_slots_answer_repeated_files_from_the_ledger_and_keep_the_memory(tmp_path: Path) -> None:
    # Every proposal writes the same worse file: after the first is measured (a discard),
    # every later one is a duplicate, whatever slot proposes it, and the memory is kept.
    same = "sed -i 's/^A = 0/A = -1/' calc.py\nsleep 0.3\n"
    repo = script_campaign(
        tmp_path,
        same,
        bench=ADDITIVE,
        files={"calc.py": SPACED},
        **{"stop.max_iterations": 6},
    )
    records, _ = run(repo, 2)
    statuses = [r.status for r in records[1:]]
    measured = [s for s in statuses if s is Status.DISCARD]
    # Proposals already in flight when the first is measured may be measured too (nothing
    # was known yet); every one after that is answered from the ledger.
    assert statuses.count(Status.DUPLICATE) >= 3 and len(measured) <= 2, statuses
    assert statuses[-1] is Status.DUPLICATE
    assert (repo / ".autoresearch" / "t" / "memory.md").is_file()
    assert verify_campaign(repo, repo / ".autoresearch" / "t", "t").ok
