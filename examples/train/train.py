"""A small neural network and how it is trained; the constants below are the knobs.

The campaign edits only this file. evaluate.py (the harness) owns the data, the budget of
steps and the seeds, calls `fit`, and scores the model on data `fit` never sees. The model
trains with PyTorch on a GPU when one is there (CUDA or ROCm), with NumPy otherwise.
"""

from __future__ import annotations

import importlib.util

import numpy as np

LEARNING_RATE = 0.003  # step size of SGD
MOMENTUM = 0.0  # SGD momentum
HIDDEN = 8  # units in each of the two hidden layers
BATCH_SIZE = 32  # examples per step


def device() -> str:
    """"cuda" when PyTorch is installed and finds a GPU, else "cpu" (NumPy)."""
    if importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def fit(x: np.ndarray, y: np.ndarray, steps: int, seed: int):  # noqa: ANN201
    """Train on (x, y) for `steps` steps from a seeded start; return a function that gives
    the class probabilities of new points."""
    if device() == "cuda":
        return _fit_torch(x, y, steps, seed)
    return _fit_numpy(x, y, steps, seed)


def _fit_numpy(x: np.ndarray, y: np.ndarray, steps: int, seed: int):  # noqa: ANN202
    rng = np.random.default_rng(seed)
    sizes = [x.shape[1], HIDDEN, HIDDEN, int(y.max()) + 1]
    weights = [rng.normal(0, np.sqrt(2 / a), (a, b)) for a, b in zip(sizes, sizes[1:])]
    biases = [np.zeros(b) for b in sizes[1:]]
    velocity = [np.zeros_like(p) for p in weights + biases]

    def forward(inputs: np.ndarray) -> list[np.ndarray]:
        layers = [inputs]
        for k, (w, b) in enumerate(zip(weights, biases)):
            out = layers[-1] @ w + b
            layers.append(np.tanh(out) if k < len(weights) - 1 else out)
        return layers

    for _ in range(steps):
        batch = rng.integers(0, len(x), BATCH_SIZE)
        layers = forward(x[batch])
        grad = _softmax(layers[-1])
        grad[np.arange(BATCH_SIZE), y[batch]] -= 1
        grad /= BATCH_SIZE
        grads_w, grads_b = [], []
        for k in range(len(weights) - 1, -1, -1):
            grads_w.insert(0, layers[k].T @ grad)
            grads_b.insert(0, grad.sum(axis=0))
            if k:
                grad = (grad @ weights[k].T) * (1 - layers[k] ** 2)
        for p, g, v in zip(weights + biases, grads_w + grads_b, velocity):
            v *= MOMENTUM
            v -= LEARNING_RATE * g
            p += v
    return lambda inputs: _softmax(forward(inputs)[-1])


def _fit_torch(x: np.ndarray, y: np.ndarray, steps: int, seed: int):  # noqa: ANN202
    import torch

    torch.manual_seed(seed)
    gpu = torch.device("cuda")
    xs = torch.tensor(x, dtype=torch.float32, device=gpu)
    ys = torch.tensor(y, dtype=torch.long, device=gpu)
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, int(y.max()) + 1),
    ).to(gpu)
    optimiser = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    batches = torch.Generator(device=gpu).manual_seed(seed)
    for _ in range(steps):
        batch = torch.randint(0, len(xs), (BATCH_SIZE,), device=gpu, generator=batches)
        loss = torch.nn.functional.cross_entropy(model(xs[batch]), ys[batch])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    def predict(inputs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = model(torch.tensor(inputs, dtype=torch.float32, device=gpu))
            return torch.softmax(out, dim=1).cpu().numpy()

    return predict


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
