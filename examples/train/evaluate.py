"""Harness: train `train.fit` for a fixed budget of steps on fixed data, print the
validation loss.

The data (two interleaved spirals, generated from a fixed seed), the budget and the seeds
never change during a campaign (this file is fingerprinted). The loss is the mean over
three seeds, so that a change is judged by how it trains, not by one lucky start.
"""

import numpy as np

import train

STEPS = 400
SEEDS = (0, 1, 2)


def spirals(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    label = rng.integers(0, 2, n)
    sign = np.where(label == 0, 1.0, -1.0)
    points = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], axis=1) / (3 * np.pi)
    return points + rng.normal(0, 0.03, points.shape), label


x_train, y_train = spirals(2000, seed=100)
x_val, y_val = spirals(1000, seed=200)
losses = []
for seed in SEEDS:
    predict = train.fit(x_train, y_train, STEPS, seed)
    p = np.clip(predict(x_val)[np.arange(len(y_val)), y_val], 1e-12, 1.0)
    losses.append(float(-np.log(p).mean()))
print(f"device: {train.device()}")
print(f"val_loss: {np.mean(losses):.6f}")
