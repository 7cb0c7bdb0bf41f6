"""A kernel classifier for handwritten digits; its hyperparameters are the knobs.

The campaign edits only the constants below; evaluate.py (the harness) trains and scores.
"""

import numpy as np

# Regularisation: higher fits the training data more tightly.
C = 1.0
# RBF kernel width; too large and every digit looks unlike every other.
GAMMA = 10.0


def rbf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel exp(-GAMMA * |x - z|^2) of every row of a against every row of b."""
    squared = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.exp(-GAMMA * np.maximum(squared, 0.0))


class KernelRidge:
    """One-vs-rest kernel ridge regression on +1/-1 targets; predicts the largest score."""

    def fit(self, x: np.ndarray, y: np.ndarray) -> "KernelRidge":
        self.x = x
        self.classes = np.unique(y)
        targets = np.where(y[:, None] == self.classes[None, :], 1.0, -1.0)
        kernel = rbf(x, x) + np.eye(len(x)) / C
        self.weights = np.linalg.solve(kernel, targets)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.classes[(rbf(x, self.x) @ self.weights).argmax(1)]


def build_model() -> KernelRidge:
    return KernelRidge()
