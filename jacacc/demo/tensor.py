"""Demo part ``tensor`` (paper 002): a Hessian by cross-country mode beside reverse mode and JAX.

The Hessian of logistic regression with an L2 term, ``Σ log(1 + exp(−y·Xw)) +
λ‖w‖²``, by :func:`jacacc.tensor.hessian` in paper 002's cross-country mode:
its FLOPs (of the derivative expression the evaluator runs) against reverse
mode's, its time per warm call against ``jax.jit(jax.hessian(f))`` on the
same float64 inputs, and its value against the closed form
``Xᵀ diag(s(1 − s)) X + 2λI`` (``s`` the logistic of ``−y·Xw``) and JAX's.
The sizes keep every elementwise step below the evaluator's fusion threshold,
so nothing is compiled by Numba.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from jacacc.demo.registry import register_part
from jacacc.demo.report import Report, best_time, format_time

__all__ = ["CLOSED_FORM_RTOL", "JAX_RTOL", "LAMBDA", "SIZES", "closed_form_hessian", "logistic_l2", "run"]

LAMBDA = 0.35
SIZES = (400, 25)  # samples n, features d
CLOSED_FORM_RTOL = 1e-12
JAX_RTOL = 1e-10


def logistic_l2(w: Any, X: Any, y: Any) -> Any:
    """Logistic regression's loss with labels ``y ∈ {−1, 1}`` plus ``λ‖w‖²`` (plain NumPy)."""
    return np.sum(np.log(np.exp(-y * (X @ w)) + 1)) + LAMBDA * np.sum(w * w)


def closed_form_hessian(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``Xᵀ diag(s(1 − s)) X + 2λI`` with ``s = 1 / (1 + exp(y·Xw))``: the Hessian of :func:`logistic_l2`.

    Examples
    --------
    >>> X = np.arange(6.0).reshape(3, 2) / 10
    >>> np.allclose(closed_form_hessian(np.zeros(2), X, np.ones(3)), X.T @ X / 4 + 2 * LAMBDA * np.eye(2))
    True
    """
    s = 1 / (1 + np.exp(y * (X @ w)))
    return (X.T * (s * (1 - s))) @ X + 2 * LAMBDA * np.eye(w.size)


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(w, X, y)`` at :data:`SIZES`: standard normal features, labels ±1, small weights."""
    rng = np.random.default_rng(seed)
    n, d = SIZES
    return 0.1 * rng.standard_normal(d), rng.standard_normal((n, d)), rng.choice([-1.0, 1.0], n)


@contextlib.contextmanager
def _jax_float64(jax: Any) -> Iterator[None]:
    """JAX in float64 for the block only (the global setting stays as it was)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is None:  # older JAX
        from jax.experimental import enable_x64 as enable
    with enable(True):
        yield


@register_part("tensor", "paper 002: a logistic-regression Hessian by cross-country mode; FLOPs vs reverse, time vs JAX")
def run(report: Report) -> None:
    """The Hessian by cross-country mode, its FLOPs beside reverse mode's and its time beside JAX's."""
    import jacacc.tensor as jt

    w, X, y = data()
    n, d = SIZES
    report.line(f"f(w) = Σ log(1 + exp(−y·Xw)) + {LAMBDA}·‖w‖²,  X: {n} × {d}, float64")
    expressions = {mode: jt.derivative_expression(logistic_l2, w, X, y, order=2, mode=mode)
                   for mode in ("cross_country", "reverse", "forward")}
    report.line("the Hessian as jacacc derives it (cross-country mode):")
    for line in str(expressions["cross_country"]).splitlines():
        report.line(f"  {line}")
    flops = {mode: e.flops for mode, e in expressions.items()}
    report.line("FLOPs of one evaluation of the Hessian expression: "
                + ", ".join(f"{mode} {count:,}" for mode, count in flops.items()))

    hessian = jt.hessian(logistic_l2, mode="cross_country")
    H = hessian(w, X, y)
    ours = best_time(lambda: hessian(w, X, y))
    timing = f"jacacc.tensor.hessian {format_time(ours)}"
    H_jax = None
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as exc:
        report.skip("the comparison with JAX", f"JAX is not importable: {exc}")
    else:
        def logistic_l2_jax(w: Any, X: Any, y: Any) -> Any:
            return jnp.sum(jnp.log(jnp.exp(-y * (X @ w)) + 1)) + LAMBDA * jnp.sum(w * w)

        with _jax_float64(jax):
            jax_hessian = jax.jit(jax.hessian(logistic_l2_jax))
            args = [jnp.asarray(a) for a in (w, X, y)]
            H_jax = np.asarray(jax_hessian(*args))
            theirs = best_time(lambda: jax_hessian(*args).block_until_ready())
        timing += f", jax.jit(jax.hessian(f)) {format_time(theirs)} (ratio jacacc/JAX {ours / theirs:.2f})"
    report.line(f"time per warm call, best of 5 rounds: {timing}")

    ratio = flops["cross_country"] / flops["reverse"]
    headline = (f"Hessian FLOPs: cross-country {flops['cross_country']:,} against reverse mode's "
                f"{flops['reverse']:,} ({ratio:.2f}×); {format_time(ours)} per call")
    if H_jax is not None:
        headline += f" against JAX's {format_time(theirs)}"
    report.headline(headline)
    report.require(f"cross-country needs no more FLOPs than reverse mode ({ratio:.2f}×)",
                   flops["cross_country"] <= flops["reverse"])
    report.close("Hessian vs the closed form Xᵀdiag(s(1−s))X + 2λI", H, closed_form_hessian(w, X, y),
                 CLOSED_FORM_RTOL)
    report.close("Hessian vs reverse mode's Hessian", H, jt.hessian(logistic_l2, mode="reverse")(w, X, y),
                 CLOSED_FORM_RTOL)
    if H_jax is not None:
        report.close("Hessian vs jax.hessian (float64)", H, H_jax, JAX_RTOL)
