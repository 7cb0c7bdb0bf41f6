"""Harness: train train.build_model() on a fixed split of scikit-learn's digits, print the error.

The split and the scoring never change during a campaign (this file is fingerprinted).
"""

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import train

X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(
    X, y, test_size=0.3, random_state=0, stratify=y
)
model = train.build_model().fit(X_train, y_train)
error = 1.0 - model.score(X_val, y_val)
print(f"val_error: {error:.6f}")
