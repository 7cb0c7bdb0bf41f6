"""Reading the number: the last number, a pattern's group, and every way it can fail."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoresearch.measure.readout import MetricParseError, extract_number


@pytest.mark.parametrize(
    "text,pattern,value",
    [
        ("loss 0.5\nloss 0.25\n", None, 0.25),
        ("val: 1e-3", None, 1e-3),
        ("score: -4\n", r"score: ([-+0-9.eE]+)", -4),
        ("score: 3\nscore: 2\nother 9\n", r"score: ([-+0-9.eE]+)", 2),
        ("epoch 10 acc=0.91", r"acc=([0-9.]+)", 0.91),
        ("x 7.", None, 7),
        ("v1 result 12", None, 12),
    ],
)
def test_extract_number(text: str, pattern: str | None, value: float) -> None:
    assert extract_number(text, pattern) == pytest.approx(value)


@pytest.mark.parametrize(
    "text,pattern,message",
    [
        ("", None, "no number"),
        ("nothing here", None, "no number"),
        ("loss nan", None, "not a finite number"),
        ("loss inf", None, "not a finite number"),
        ("score: x", r"score: (\S+)", "not a number"),
        ("other 1", r"score: (\d+)", "no line matched"),
    ],
)
def test_extract_number_failures(text: str, pattern: str | None, message: str) -> None:
    with pytest.raises(MetricParseError, match=message):
        extract_number(text, pattern)


@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_extract_number_round_trips_any_float(value: float) -> None:
    assert extract_number(f"metric: {value!r}\n", None) == value


def test_a_pattern_is_matched_in_this_process_and_still_bounded() -> None:
    """No interpreter is started per run to read the number, and a pattern that would
    backtrack for hours stops at its budget."""
    import time

    from autoresearch.measure.readout import MetricParseError, extract_number
    from autoresearch.testing.proposer_suite import counting_spawns

    with counting_spawns() as started:
        assert extract_number("loss 0.5\nscore: 4.25\n", r"score: (\S+)") == 4.25
    assert started == []
    began = time.monotonic()
    try:
        extract_number("a" * 5000, r"^(\d+|(?:a|aa)+b)$", budget=1.0)
    except MetricParseError as exc:
        assert "was still matching after 1.0 s" in str(exc)
    else:
        raise AssertionError("a catastrophic pattern was not stopped")
    assert time.monotonic() - began < 5
