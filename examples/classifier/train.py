"""A support-vector classifier for handwritten digits; its hyperparameters are the knobs.

The campaign edits only the constants below; evaluate.py (the harness) trains and scores.
"""

from sklearn.svm import SVC

# Regularisation strength: higher fits the training data more tightly.
C = 1.0
# RBF kernel width; too large and every digit looks unlike every other.
GAMMA = 0.1


def build_model() -> SVC:
    return SVC(C=C, gamma=GAMMA)
