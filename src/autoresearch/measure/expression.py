"""A composite score such as `0.7*acc - 0.3*latency_ms/100`, evaluated without `eval`.

The expression is parsed once with `ast` and only a small grammar is accepted: numbers,
metric names, + - * / ** %, unary minus, comparisons (true is 1, false is 0, so a hard
gate is a factor: `(tests_failed == 0) * (coverage >= 80) * quality`), and the functions
min, max and abs. Anything else (attributes, calls of other names, subscripts, lambdas,
strings) is refused when the config is read, never executed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

MAX_LENGTH = 500
MAX_POWER = 64.0  # 10**10**10 must not hang the engine

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "abs": abs}


class ExpressionError(ValueError):
    """The expression cannot be used as a score, or cannot be computed from the values."""


class Expression:
    """A parsed, checked score expression: `names` are the metrics it reads."""

    def __init__(self, text: str) -> None:
        if not text.strip():
            raise ExpressionError("is empty; write a formula like '0.7*acc - 0.3*latency'")
        if len(text) > MAX_LENGTH:
            raise ExpressionError(f"is longer than {MAX_LENGTH} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"is not a formula ({exc.msg})") from None
        self.text = text
        self.body = tree.body
        names: list[str] = []
        self._check(self.body, names)
        if not names:
            raise ExpressionError("names no metric; it would be the same for every candidate")
        self.names = tuple(dict.fromkeys(names))

    def _check(self, node: ast.AST, names: list[str]) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ExpressionError(f"may hold only numbers, not {node.value!r}")
        elif isinstance(node, ast.Name):
            if node.id in _FUNCTIONS:
                raise ExpressionError(f"uses {node.id} without calling it")
            names.append(node.id)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left, names)
            self._check(node.right, names)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            self._check(node.operand, names)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            self._check(node.left, names)
            for item in node.comparators:
                self._check(item, names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
            and node.args
        ):
            if node.func.id == "abs" and len(node.args) != 1:
                raise ExpressionError("abs() takes one value")
            for arg in node.args:
                self._check(arg, names)
        else:
            shown = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
            raise ExpressionError(
                f"may use only numbers, metric names, + - * / ** %, comparisons and "
                f"min/max/abs; {shown!r} is none of these"
            )

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The score for these metric values; ExpressionError when it is not a finite
        number (a missing name, a division by zero, an overflow)."""
        try:
            result = self._eval(self.body, values)
        except ZeroDivisionError:
            raise ExpressionError(f"{self.text!r} divides by zero") from None
        except OverflowError:
            raise ExpressionError(f"{self.text!r} overflows") from None
        except TypeError:  # a negative number to a fractional power is complex
            raise ExpressionError(f"{self.text!r} is not a real number here") from None
        if not math.isfinite(result):
            raise ExpressionError(f"{self.text!r} is {result}, not a finite number")
        return result

    def _eval(self, node: ast.AST, values: Mapping[str, float]) -> float:
        if isinstance(node, ast.Constant):
            assert isinstance(node.value, int | float)  # checked at parse
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise ExpressionError(f"needs the metric {node.id!r}, which was not reported")
            return float(values[node.id])
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, values), self._eval(node.right, values)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
                raise ExpressionError(f"raises to the power {right:g}, more than {MAX_POWER:g}")
            return float(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, values)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, values)
            for op, item in zip(node.ops, node.comparators, strict=True):
                right = self._eval(item, values)
                if not _COMPARE[type(op)](left, right):
                    return 0.0
                left = right
            return 1.0
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            args = [self._eval(arg, values) for arg in node.args]
            return float(_FUNCTIONS[node.func.id](*args))
        raise ExpressionError(f"cannot compute {type(node).__name__}")  # checked at parse
