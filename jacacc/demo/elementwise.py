"""Demo part ``elementwise`` (paper 000): §6's derivative in gather form.

Paper 000 §6 defines ``f[i, j] = exp(−Σ_k ((a[i,k] + b[j,k])²·c[i,i] + d[i+k]³))``
and derives its four derivatives.  :func:`jacacc.elementwise.define` derives
them in gather form (§5): each element of ``dd`` is one independent sum over
the elements of ``df`` that reach it — the index ``i = dd0 − z`` solved for,
the range of ``z`` from Fourier–Motzkin elimination — so a kernel needs one
thread per element and no atomics.  Printed, evaluated by the interpreter
backend (nothing compiled), and checked against the scatter form (reverse
mode's scatter-add, written by hand with ``np.add.at``) and central
differences.
"""

from __future__ import annotations

import numpy as np

from jacacc.demo.registry import register_part
from jacacc.demo.report import Report, central_differences, relative_error

__all__ = ["FD_RTOL", "SCATTER_RTOL", "SECTION_6", "SIZES", "run", "scatter_form", "section6_arrays"]

SECTION_6 = "f[i, j] = exp(-sum(k, 0, 4, (a[i, k] + b[j, k])**2 * c[i, i] + d[i + k]**3))"
SIZES = {"i": 3, "j": 4}
SCATTER_RTOL = 1e-12
FD_RTOL = 1e-6


def section6_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """Random arguments of §6's function: a (3, 5), b (4, 5), c (3, 3), d (8,) (``d[7]`` is never read)."""
    rng = np.random.default_rng(seed)
    return {"a": rng.uniform(-1, 1, (3, 5)), "b": rng.uniform(-1, 1, (4, 5)), "c": rng.uniform(0, 1, (3, 3)),
            "d": rng.uniform(-1, 1, 8)}


def scatter_form(df: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                 d: np.ndarray) -> dict[str, np.ndarray]:
    """§6's vector–Jacobian product the way reverse mode computes it: every term of every
    ``f[i, j]`` adds its contribution into the arguments it read (``np.add.at``, a scatter-add).

    Examples
    --------
    >>> arrays = section6_arrays()
    >>> sorted((k, v.shape) for k, v in scatter_form(np.ones((3, 4)), **arrays).items())
    [('a', (3, 5)), ('b', (4, 5)), ('c', (3, 3)), ('d', (8,))]
    """
    n_i, n_j, n_k = df.shape[0], df.shape[1], a.shape[1]
    i, j, k = np.meshgrid(np.arange(n_i), np.arange(n_j), np.arange(n_k), indexing="ij")
    s = a[i, k] + b[j, k]
    f = np.exp(-np.sum(s ** 2 * c[i, i] + d[i + k] ** 3, axis=2))
    g = (-df * f)[:, :, None] * np.ones(n_k)  # ∂(Σ df·f)/∂(the sum's term), for every (i, j, k)
    out = {name: np.zeros_like(v, dtype=float) for name, v in (("a", a), ("b", b), ("c", c), ("d", d))}
    np.add.at(out["a"], (i, k), g * 2 * s * c[i, i])
    np.add.at(out["b"], (j, k), g * 2 * s * c[i, i])
    np.add.at(out["c"], (i, i), g * s ** 2)
    np.add.at(out["d"], i + k, g * 3 * d[i + k] ** 2)
    return out


@register_part("elementwise", "paper 000: §6's elementwise derivatives in gather form vs the scatter form")
def run(report: Report) -> None:
    """Derive §6's function in gather form, print ``dd``, check all four derivatives."""
    import jacacc.elementwise as ew

    f = ew.define(SECTION_6, SIZES, backend="python")  # the interpreter: nothing compiled
    arrays = section6_arrays()
    df = np.random.default_rng(1).standard_normal((SIZES["i"], SIZES["j"]))
    report.line(f"§6: {SECTION_6}   ({', '.join(f'{k} < {v}' for k, v in SIZES.items())})")
    derivatives = {x: f.derivative(x) for x in "abcd"}
    report.line("the derivatives in gather form:")
    for x in "abcd":
        report.line(f"  {derivatives[x]}")
    gathered = {x: derivatives[x](df=df, **arrays) for x in "abcd"}
    scattered = scatter_form(df, **arrays)
    fd = {x: central_differences(lambda v, x=x: np.sum(df * f(**{**arrays, x: v})), arrays[x]) for x in "abcd"}
    for x in "abcd":
        report.line(f"d{x}: gather vs scatter {relative_error(gathered[x], scattered[x]):.1e}, "
                    f"vs central differences {relative_error(gathered[x], fd[x]):.1e}")
    worst_scatter = max(relative_error(gathered[x], scattered[x]) for x in "abcd")
    worst_fd = max(relative_error(gathered[x], fd[x]) for x in "abcd")
    report.headline(f"gather form (one independent sum per gradient element) against reverse mode's "
                    f"scatter-add: largest relative difference {worst_scatter:.1e} over da, db, dc, dd")
    report.require(f"all four derivatives vs the scatter form: worst relative error {worst_scatter:.1e} "
                   f"(rtol {SCATTER_RTOL:g})", worst_scatter <= SCATTER_RTOL)
    report.require(f"all four derivatives vs central differences: worst relative error {worst_fd:.1e} "
                   f"(rtol {FD_RTOL:g})", worst_fd <= FD_RTOL)
    report.require("dd[7] == 0 exactly (d[7] is never read) and dc == 0 off the diagonal exactly",
                   gathered["d"][7] == 0.0 and np.all(gathered["c"][~np.eye(3, dtype=bool)] == 0.0))
    vjp = f.vjp(df, **arrays)
    report.require("f.vjp (all four at once) equals the derivative functions to 1e-14",
                   all(relative_error(vjp[x], gathered[x]) <= 1e-14 for x in "abcd"))
