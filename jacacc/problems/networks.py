"""Scalarized neural-network tasks of the AlphaGrad study: Perceptron and Encoder.

The vector-valued tasks of Lohoff & Neftci (2024), written with NumPy on
arrays so that :func:`jacacc.trace` scalarizes them: traced on an object array
of inputs, every matrix product, layer norm and softmax unrolls into scalar
operations, which makes computational graphs of 10²–10⁴ vertices — scale
tests for the elimination heuristics.  The same functions run on float arrays.

Weights are fixed from a seeded generator (:data:`PERCEPTRON_SEED`,
:data:`ENCODER_SEED` for the registered instances), so each task is a function
x ↦ loss of the network input alone; :func:`make_perceptron` can also take the
weights as inputs (the training gradient).  Only operations the tracer knows
are used (+ − × ÷, ``**``, ``np.tanh``, ``np.exp``, ``np.log``, ``np.sqrt``,
``np.sum``, ``np.mean``, ``@``), and nothing compares traced values: the
softmax does not subtract the maximum, which is safe at these sizes because
the logits stay O(1).

References
----------
J. Lohoff and E. Neftci, "Optimizing Automatic Differentiation with Deep
Reinforcement Learning" (AlphaGrad), 2024 — task set in ../shared/problems.md.
J. L. Ba, J. R. Kiros, G. E. Hinton, "Layer Normalization", 2016.
A. Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc.problems.base import Problem, register

__all__ = [
    "ENCODER_SEED",
    "PERCEPTRON_PARAMS",
    "PERCEPTRON_SEED",
    "encoder",
    "encoder_params",
    "layer_norm",
    "make_encoder",
    "make_perceptron",
    "perceptron",
    "perceptron_params",
    "silu",
    "softmax_cross_entropy",
]

#: Seed of the weights of the registered Perceptron instances.
PERCEPTRON_SEED = 2024
#: Seed of the weights of the registered Encoder instances.
ENCODER_SEED = 2025
#: Layer-norm epsilon.
LN_EPS = 1e-5
#: Order in which :func:`make_perceptron` flattens the weights when they are inputs.
PERCEPTRON_PARAMS = ("W1", "b1", "gamma", "beta", "W2", "b2")

_SOURCE = "AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md; jacacc.problems.networks"


# ---------------------------------------------------------------------------- building blocks
def layer_norm(h: Any, gamma: Any, beta: Any, eps: float = LN_EPS) -> Any:
    """Layer normalization of a vector: (h − mean) / √(var + eps) · γ + β.

    Examples
    --------
    >>> np.round(layer_norm(np.array([1.0, 2.0, 3.0]), 1.0, 0.0), 4)
    array([-1.2247,  0.    ,  1.2247])
    """
    d = h - np.mean(h)
    return d / np.sqrt(np.mean(d * d) + eps) * gamma + beta


def silu(z: Any) -> Any:
    """SiLU (swish): z·σ(z) = z / (1 + e^{−z}).

    Examples
    --------
    >>> round(float(silu(1.0)), 6)
    0.731059
    """
    return z / (1.0 + np.exp(-z))


def softmax_cross_entropy(logits: Any, label: int) -> Any:
    """−log softmax(logits)[label] = log Σ_k e^{z_k} − z_label (no max shift: see the module doc).

    Examples
    --------
    >>> round(float(softmax_cross_entropy(np.array([0.0, 0.0]), 1)), 6)
    0.693147
    """
    return np.log(np.sum(np.exp(logits))) - logits[label]


def _softmax(z: Any) -> Any:
    e = np.exp(z)
    return e / np.sum(e)


# ---------------------------------------------------------------------------- perceptron
def perceptron_params(n_in: int, n_hidden: int, n_out: int, seed: int | None = PERCEPTRON_SEED) -> dict:
    """Weights of :func:`perceptron` drawn from ``default_rng(seed)``.

    ``W1`` (n_in × n_hidden) and ``W2`` (n_hidden × n_out) are Gaussian with
    variance 1/fan-in; biases N(0, 0.1²); layer-norm γ = 1 + N(0, 0.1²),
    β = N(0, 0.1²); the class ``label`` is uniform in 0 … n_out−1.
    """
    rng = np.random.default_rng(seed)
    return {
        "W1": rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_in, n_hidden)),
        "b1": rng.normal(0.0, 0.1, n_hidden),
        "gamma": 1.0 + rng.normal(0.0, 0.1, n_hidden),
        "beta": rng.normal(0.0, 0.1, n_hidden),
        "W2": rng.normal(0.0, 1.0 / np.sqrt(n_hidden), (n_hidden, n_out)),
        "b2": rng.normal(0.0, 0.1, n_out),
        "label": int(rng.integers(n_out)),
    }


def perceptron(x: Any, params: dict) -> Any:
    """The AlphaGrad Perceptron loss: tanh layer, layer norm, tanh layer, softmax cross-entropy.

    loss = CE(softmax(tanh(W2ᵀ·LN(tanh(W1ᵀx + b1)) + b2)), label)

    Parameters
    ----------
    x : array of shape (n_in,)
        Floats, or an object array of traced values.
    params : dict
        As returned by :func:`perceptron_params` (arrays may be object arrays).

    Returns
    -------
    The scalar loss.

    Examples
    --------
    >>> p = perceptron_params(3, 4, 2, seed=0)
    >>> round(float(perceptron(np.array([0.5, -1.0, 2.0]), p)), 6)
    0.621585
    """
    h = np.tanh(x @ params["W1"] + params["b1"])
    h = layer_norm(h, params["gamma"], params["beta"])
    z = np.tanh(h @ params["W2"] + params["b2"])
    return softmax_cross_entropy(z, params["label"])


def make_perceptron(
    n_in: int,
    n_hidden: int,
    n_out: int,
    seed: int | None = PERCEPTRON_SEED,
    *,
    weights_as_inputs: bool = False,
) -> tuple[Callable[[Any], Any], int]:
    """A Perceptron task as a function of one flat vector, and its length.

    With ``weights_as_inputs=False`` the function is x ↦ loss with the weights
    of :func:`perceptron_params` (``seed``) fixed; with ``True`` its input is
    x followed by the weights flattened in :data:`PERCEPTRON_PARAMS` order
    (matrices row-major), so the Jacobian is the training gradient; the label
    still comes from ``seed``.

    Returns
    -------
    fn : callable
        ``fn(v) -> [loss]``, for float vectors and traced object arrays.
    n_inputs : int

    Examples
    --------
    >>> import jacacc
    >>> fn, n = make_perceptron(3, 4, 2, seed=0)
    >>> n, jacacc.trace(fn, n, unpack=False).graph.n_edges > 0
    (3, True)
    >>> fn_w, n_w = make_perceptron(3, 4, 2, seed=0, weights_as_inputs=True)
    >>> n_w
    37
    """
    params = perceptron_params(n_in, n_hidden, n_out, seed)
    if not weights_as_inputs:

        def fn(x: Any) -> list[Any]:
            return [perceptron(x, params)]

        return fn, n_in

    shapes = [(name, np.shape(params[name])) for name in PERCEPTRON_PARAMS]
    sizes = [int(np.prod(shape)) for _, shape in shapes]
    n_inputs = n_in + sum(sizes)

    def fn_w(v: Any) -> list[Any]:
        v = np.asarray(v)  # a list of floats works too; object arrays of tracers stay as they are
        weights, pos = {"label": params["label"]}, n_in
        for (name, shape), size in zip(shapes, sizes, strict=True):
            weights[name] = v[pos : pos + size].reshape(shape)
            pos += size
        return [perceptron(v[:n_in], weights)]

    return fn_w, n_inputs


def _flat_perceptron_weights(params: dict) -> np.ndarray:
    return np.concatenate([np.ravel(params[name]) for name in PERCEPTRON_PARAMS])


# ---------------------------------------------------------------------------- encoder
def encoder_params(
    seq_len: int,
    d_model: int,
    seed: int | None = ENCODER_SEED,
    *,
    n_blocks: int = 2,
    d_ff: int | None = None,
    n_classes: int | None = None,
) -> dict:
    """Weights of :func:`encoder` drawn from ``default_rng(seed)``.

    Per block: layer-norm γ, β (twice), single-head projections Wq, Wk, Wv, Wo
    (d_model × d_model, no bias; the 1/√d_model score scale is folded into
    Wq), an MLP W1 (d_model × d_ff), c1, W2 (d_ff × d_model), c2.  Then a
    classifier Wout (d_model × n_classes), bout and one label per position.
    Matrices are Gaussian with variance 1/fan-in, biases and γ−1, β N(0, 0.1²).
    ``d_ff`` defaults to d_model, ``n_classes`` to d_model.
    """
    d_ff = d_model if d_ff is None else d_ff
    n_classes = d_model if n_classes is None else n_classes
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0.0, 1.0 / np.sqrt(rows), (rows, cols))

    def vec(n: int, centre: float = 0.0) -> np.ndarray:
        return centre + rng.normal(0.0, 0.1, n)

    blocks = []
    for _ in range(n_blocks):
        blocks.append(
            {
                "g1": vec(d_model, 1.0),
                "b1": vec(d_model),
                "Wq": mat(d_model, d_model) / np.sqrt(d_model),
                "Wk": mat(d_model, d_model),
                "Wv": mat(d_model, d_model),
                "Wo": mat(d_model, d_model),
                "g2": vec(d_model, 1.0),
                "b2": vec(d_model),
                "W1": mat(d_model, d_ff),
                "c1": vec(d_ff),
                "W2": mat(d_ff, d_model),
                "c2": vec(d_model),
            }
        )
    return {
        "seq_len": seq_len,
        "d_model": d_model,
        "blocks": blocks,
        "Wout": mat(d_model, n_classes),
        "bout": vec(n_classes),
        "labels": rng.integers(n_classes, size=seq_len).tolist(),
    }


def _attention_block(xs: list[Any], p: dict) -> list[Any]:
    """One pre-LN encoder block on a sequence of vectors (a list of rows)."""
    h = np.stack([layer_norm(x, p["g1"], p["b1"]) for x in xs])
    q, k, v = h @ p["Wq"], h @ p["Wk"], h @ p["Wv"]
    scores = q @ k.T  # scale folded into Wq
    attn = np.stack([_softmax(row) for row in scores])
    xs = [x + o for x, o in zip(xs, (attn @ v) @ p["Wo"], strict=True)]
    h2 = np.stack([layer_norm(x, p["g2"], p["b2"]) for x in xs])
    mlp = silu(h2 @ p["W1"] + p["c1"]) @ p["W2"] + p["c2"]
    return [x + m for x, m in zip(xs, mlp, strict=True)]


def encoder(x: Any, params: dict) -> Any:
    """The AlphaGrad Encoder loss: attention blocks with layer norm and SiLU, softmax cross-entropy.

    ``x`` (length seq_len·d_model) is the input sequence, row-major.  Each
    block (pre-LN transformer encoder, single head):
    H = LN(X); X ← X + softmax(H Wq (H Wk)ᵀ) H Wv Wo; X ← X + SiLU(LN(X) W1 + c1) W2 + c2.
    Then logits = X Wout + bout per position and the loss is the mean
    softmax cross-entropy against the fixed labels.

    Examples
    --------
    >>> p = encoder_params(2, 3, seed=0)
    >>> round(float(encoder(np.linspace(-1.0, 1.0, 6), p)), 6)
    0.702284
    """
    seq_len, d_model = params["seq_len"], params["d_model"]
    rows = np.reshape(x, (seq_len, d_model))
    xs = [rows[t] for t in range(seq_len)]
    for block in params["blocks"]:
        xs = _attention_block(xs, block)
    losses = [
        softmax_cross_entropy(row @ params["Wout"] + params["bout"], label)
        for row, label in zip(xs, params["labels"], strict=True)
    ]
    return np.sum(np.array(losses, dtype=object)) / seq_len


def make_encoder(
    seq_len: int,
    d_model: int,
    seed: int | None = ENCODER_SEED,
    **options: Any,
) -> tuple[Callable[[Any], Any], int]:
    """An Encoder task x ↦ [loss] with fixed weights (:func:`encoder_params`), and its input length.

    ``options`` (``n_blocks``, ``d_ff``, ``n_classes``) go to :func:`encoder_params`.

    Examples
    --------
    >>> fn, n = make_encoder(2, 3, seed=0)
    >>> n
    6
    """
    params = encoder_params(seq_len, d_model, seed, **options)

    def fn(x: Any) -> list[Any]:
        return [encoder(x, params)]

    return fn, seq_len * d_model


# ---------------------------------------------------------------------------- the zoo
def _register_perceptron(
    name: str, n_in: int, n_hidden: int, n_out: int, *, weights: bool = False, scale: bool = False
) -> None:
    fn, n_inputs = make_perceptron(n_in, n_hidden, n_out, PERCEPTRON_SEED, weights_as_inputs=weights)
    if weights:
        base = _flat_perceptron_weights(perceptron_params(n_in, n_hidden, n_out, PERCEPTRON_SEED))

        def sampler(rng: np.random.Generator) -> np.ndarray:
            # x ~ N(0, 1); the weights: the seeded ones, perturbed by N(0, 0.05²)
            return np.concatenate([rng.normal(size=n_in), base + rng.normal(0.0, 0.05, base.size)])

        what = f"gradient of the loss in x and all {n_inputs - n_in} weights"
    else:

        def sampler(rng: np.random.Generator) -> np.ndarray:
            return rng.normal(size=n_in)

        what = "loss as a function of the input x, weights fixed"
    register(
        Problem(
            name,
            f"Perceptron {n_in}→{n_hidden}→{n_out} (tanh, layer norm, tanh, softmax CE), {what}; "
            f"make_perceptron({n_in}, {n_hidden}, {n_out}, seed={PERCEPTRON_SEED}"
            f"{', weights_as_inputs=True' if weights else ''}); x ~ N(0, 1)",
            _SOURCE,
            n_inputs,
            1,
            fn=fn,
            sampler=sampler,
            tags=("alphagrad", "matrix", "scale") if scale else ("alphagrad", "matrix"),
        )
    )


def _register_encoder(name: str, seq_len: int, d_model: int, *, scale: bool = False) -> None:
    fn, n_inputs = make_encoder(seq_len, d_model, ENCODER_SEED)
    register(
        Problem(
            name,
            f"Encoder: sequence {seq_len}×{d_model}, two single-head attention blocks with layer norm "
            f"and SiLU MLP, softmax CE per position; make_encoder({seq_len}, {d_model}, "
            f"seed={ENCODER_SEED}); x ~ N(0, 1)",
            _SOURCE,
            n_inputs,
            1,
            fn=fn,
            sampler=lambda rng: rng.normal(size=n_inputs),
            tags=("alphagrad", "matrix", "scale") if scale else ("alphagrad", "matrix"),
        )
    )


_register_perceptron("Perceptron_s", 4, 8, 4)
_register_perceptron("Perceptron_m", 16, 32, 10, scale=True)
_register_perceptron("Perceptron_params_s", 4, 8, 4, weights=True)
_register_encoder("Encoder_s", 2, 4)
_register_encoder("Encoder_m", 4, 8, scale=True)
