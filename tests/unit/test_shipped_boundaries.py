"""The boundaries the package ships: each is what today's judge computes for its key, and a
campaign takes them instead of simulating again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.stats import calibration
from autoresearch.stats.decide import (
    JUDGE_VERSION,
    Start,
    calibrate_key,
    calibrated_efficacy,
)


def test_todays_judge_ships_its_boundaries() -> None:
    """A judge version bumped without its boundaries shipped leaves every new machine to
    simulate them all again (most of an hour for the test suite on two cores)."""
    shipped = calibration.shipped(JUDGE_VERSION)
    assert len(shipped) >= 1000, calibration.shipped_file(JUDGE_VERSION)


@pytest.mark.parametrize(
    "family",
    [
        "mean/0.0",  # the plain sequential rule
        "robust/6.0/pairs-both",  # `auto` on symmetric noise, with its screen
        "time/0.0/pairs-both/first-3/carry",  # judged after its own version, first keep later
    ],
)
def test_a_shipped_boundary_is_the_one_todays_judge_computes(family: str) -> None:
    """The shipped value must be the honest one: computed afresh from its key, the same
    number to the last bit (the simulation's paths are fixed)."""
    shipped = calibration.shipped(JUDGE_VERSION)
    keys = sorted(k for k in shipped if k.split("/", 4)[4] == family and k.startswith("8/"))
    assert keys, f"no shipped boundary of the family {family}"
    key = keys[len(keys) // 2]
    assert calibrate_key(key) == shipped[key], key


def test_a_campaign_takes_a_shipped_boundary_without_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    request.addfinalizer(calibrated_efficacy.cache_clear)
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path))
    key = "4/0.95/3/AFTER_KEEP/mean/0.0"
    value = calibration.shipped(JUDGE_VERSION)[key]

    def simulate(*_: object) -> float:
        raise AssertionError("a shipped boundary was simulated again")

    monkeypatch.setattr("autoresearch.stats.decide._calibrate", simulate)
    calibrated_efficacy.cache_clear()
    assert calibrated_efficacy(4, 0.95, 3, Start.AFTER_KEEP) == value
    # Kept in the user's cache as a computed one is.
    assert json.loads(calibration.cache_file(JUDGE_VERSION).read_text()) == {key: value}


def test_a_key_not_shipped_is_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    request.addfinalizer(calibrated_efficacy.cache_clear)
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path))
    args = (3, 0.85, 2, Start.AFTER_KEEP)
    key = "3/0.85/2/AFTER_KEEP/mean/0.0"
    assert key not in calibration.shipped(JUDGE_VERSION)
    calibrated_efficacy.cache_clear()
    assert calibrated_efficacy(*args) == calibrate_key(key)
    assert calibrated_efficacy.__wrapped__(*args) == calibrate_key(key)


def test_another_judges_boundaries_are_never_shipped_to_todays(tmp_path: Path) -> None:
    """The shipped file is read by the version in its name only: a boundary of an earlier
    judge is one of a procedure that has changed since."""
    assert calibration.shipped(JUDGE_VERSION + 1) == {}


def test_ship_merges_the_users_cache_into_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "package"
    monkeypatch.setattr(calibration, "shipped_file", lambda judge: package / f"judge-{judge}.json")
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    calibration.shipped.cache_clear()
    try:
        (package).mkdir()
        (package / "judge-99.json").write_text(json.dumps({"a": 1.0}))
        calibration.cache_file(99).parent.mkdir()
        calibration.cache_file(99).write_text(json.dumps({"b": 2.5}))
        assert calibration.ship(99) == 2
        assert json.loads((package / "judge-99.json").read_text()) == {"a": 1.0, "b": 2.5}
    finally:
        calibration.shipped.cache_clear()


def test_ship_takes_the_newest_judge_the_users_cache_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTORESEARCH_CACHE_DIR", str(tmp_path))
    assert calibration.newest_cached_judge() is None
    for judge in (9, 13, 12):
        calibration.cache_file(judge).write_text("{}")
    (tmp_path / f"calibration-v{calibration.VERSION}-judgeX.json").write_text("{}")
    assert calibration.newest_cached_judge() == 13


def test_a_judge_bump_reships_the_earlier_judges_keys_computed_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m autoresearch.stats.reship`: every key the earlier judge shipped, calibrated
    by today's judge; nothing carried over from the earlier judge's values."""
    from autoresearch.stats import reship

    keys = ["3/0.85/2/AFTER_KEEP/mean/0.0", "3/0.85/2/FULL/mean/0.0"]
    monkeypatch.setattr(calibration, "shipped_file", lambda judge: tmp_path / f"judge-{judge}.json")
    calibration.shipped.cache_clear()
    (tmp_path / f"judge-{JUDGE_VERSION - 2}.json").write_text(json.dumps({k: 99.0 for k in keys}))
    try:
        assert reship.earlier_judge(JUDGE_VERSION) == JUDGE_VERSION - 2
        assert reship.reship(JUDGE_VERSION - 2, jobs=2) == 2  # computed in other processes
        shipped = json.loads((tmp_path / f"judge-{JUDGE_VERSION}.json").read_text())
        assert shipped == {key: calibrate_key(key) for key in keys}
    finally:
        calibration.shipped.cache_clear()


def test_reship_with_no_earlier_judge_says_so_in_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoresearch.stats import reship

    monkeypatch.setattr(calibration, "shipped_file", lambda judge: tmp_path / f"judge-{judge}.json")
    monkeypatch.setattr("sys.argv", ["reship", "--jobs", "1"])
    with pytest.raises(SystemExit) as stop:
        reship.main()
    assert stop.value.code == (
        f"no judge before {JUDGE_VERSION} ships boundaries: nothing to compute again"
    )
    assert not list(tmp_path.iterdir())
