"""Properties every rule's `Comparison` keeps, whatever the samples (hypothesis)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from autoresearch.stats.decide import Comparison, Noise, Pool, Rule, Side, Verdict

# Quarter steps: sums and shifts of these are exact, so a property cannot hinge on rounding.
values = st.integers(-400, 400).map(lambda n: n / 4)
amounts = st.integers(0, 12).map(lambda n: n / 4)
offsets = st.integers(-12, 12).map(lambda n: n / 4)


@st.composite
def samples(draw: st.DrawFn) -> tuple[list[float], list[float], list[float]]:
    """Reference, candidate and incumbent samples around one level, the candidate shifted:
    most comparisons are close calls, where a rule's details matter."""
    level = draw(values)
    effect = draw(st.integers(-16, 16).map(lambda n: n / 4))

    def around(centre: float, low: int, high: int) -> list[float]:
        return [centre + o for o in draw(st.lists(offsets, min_size=low, max_size=high))]

    return around(level, 0, 4), around(level + effect, 12, 12), around(level, 12, 12)


# Few sequential settings, and a noise estimate with so many degrees of freedom that one
# calibrated boundary serves every look: the calibration runs once per setting.
rules = st.one_of(
    st.just(Rule("strict")),
    st.builds(lambda d, p: Rule("threshold", d, p), amounts, st.booleans()),
    st.builds(lambda r: Rule("repeats", repeats=r), st.integers(2, 4)),
    st.builds(
        lambda d, p, m, c: Rule("sequential", d, p, max_samples=m, confidence=c),
        amounts,
        st.booleans(),
        st.sampled_from([2, 3]),
        st.sampled_from([0.9, 0.95]),
    ),
)
fixed_noise = st.builds(
    Noise, st.one_of(st.just(0.0), st.integers(1, 40).map(lambda n: n / 8)), st.just(2000)
)
HISTORY = tuple(float(i % 2) for i in range(1200))  # earlier samples: sigma 0.5, 1199 dof


def run(
    rule: Rule,
    direction: str,
    reference: Sequence[float],
    noise: Noise | None,
    candidate: Sequence[float],
    incumbent: Sequence[float],
    pooled: bool = False,
) -> Verdict:
    """Drive a comparison with these samples of each side, taken in the order it asks."""
    source: Noise | Pool | None = Pool((HISTORY, tuple(reference)), 1) if pooled else noise
    test = Comparison(rule, direction, reference, source, len(reference))
    sides = {Side.CANDIDATE: iter(candidate), Side.INCUMBENT: iter(incumbent)}
    while isinstance(side := test.next(), Side):
        test.add(next(sides[side]))
    assert test.verdict in (Verdict.KEEP, Verdict.DISCARD)
    return test.verdict


def reference_of(rule: Rule, drawn: list[float]) -> list[float]:
    # Only `sequential` starts without a reference (right after a keep).
    return drawn if rule.name == "sequential" or drawn else [0.0]


@settings(max_examples=300, deadline=None)
@given(
    rules,
    st.sampled_from(["minimize", "maximize"]),
    values,
    st.integers(0, 4),
    fixed_noise,
    st.booleans(),
)
def test_equal_is_never_kept(
    rule: Rule, direction: str, value: float, size: int, noise: Noise, pooled: bool
) -> None:
    reference = [value] * (size if rule.name == "sequential" else max(size, 1))
    same = [value] * 12
    assert run(rule, direction, reference, noise, same, same, pooled) is Verdict.DISCARD


@settings(max_examples=300, deadline=None)
@given(rules, samples(), fixed_noise, st.booleans())
def test_flipping_the_direction_mirrors_the_verdict(
    rule: Rule,
    drawn: tuple[list[float], list[float], list[float]],
    noise: Noise,
    pooled: bool,
) -> None:
    reference, candidate, incumbent = drawn
    reference = reference_of(rule, reference)

    def mirror(xs: Sequence[float]) -> list[float]:
        return [-x for x in xs]

    down = run(rule, "minimize", reference, noise, candidate, incumbent, pooled)
    up = run(
        rule,
        "maximize",
        mirror(reference),
        noise,
        mirror(candidate),
        mirror(incumbent),
        pooled,
    )
    assert down is up


@settings(max_examples=300, deadline=None)
@given(
    rules,
    st.sampled_from(["minimize", "maximize"]),
    samples(),
    fixed_noise,
    st.lists(amounts, min_size=12, max_size=12),
)
def test_a_larger_gain_is_never_judged_worse(
    rule: Rule,
    direction: str,
    drawn: tuple[list[float], list[float], list[float]],
    noise: Noise,
    shifts: list[float],
) -> None:
    """The same candidate, better by a non-negative amount per sample (by one amount for
    `repeats`, whose bar grows with the spread of the candidate's samples)."""
    reference, candidate, incumbent = drawn
    reference = reference_of(rule, reference)
    if rule.name == "repeats":
        shifts = [shifts[0]] * len(shifts)
    sign = -1 if direction == "minimize" else 1
    better = [x + sign * d for x, d in zip(candidate, shifts, strict=True)]
    rank = {Verdict.DISCARD: 0, Verdict.KEEP: 1}
    before = run(rule, direction, reference, noise, candidate, incumbent)
    after = run(rule, direction, reference, noise, better, incumbent)
    assert rank[after] >= rank[before]
