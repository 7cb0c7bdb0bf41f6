"""Harness: train train.build_model() on a fixed split of the digits data, print the error.

The split and the scoring never change during a campaign (this file is fingerprinted).
"""

from pathlib import Path

import numpy as np

import train

data = np.loadtxt(Path(__file__).with_name("digits.csv.gz"), delimiter=",")
x, y = data[:, :-1], data[:, -1].astype(int)
# A fixed stratified split: 30% of each digit's images, chosen once, for validation.
rng = np.random.default_rng(0)
val = np.zeros(len(y), dtype=bool)
for digit in np.unique(y):
    (rows,) = np.nonzero(y == digit)
    val[rng.choice(rows, size=round(0.3 * len(rows)), replace=False)] = True
model = train.build_model().fit(x[~val], y[~val])
error = float(np.mean(model.predict(x[val]) != y[val]))
print(f"val_error: {error:.6f}")
