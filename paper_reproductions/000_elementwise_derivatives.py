"""Paper 000 (Urban & van der Smagt, "Automatic Differentiation for Tensor Algebras"): elementwise derivatives.

What the paper says
-------------------
§5: for ``f[α] = f̄(…, x[A·α], …)`` the derivative ``dx[β] = Σ_{α ∈ Γ(β)} df[α]·∂f̄/∂x`` sums over
``Γ(β) = {α : 1 ≤ α ≤ N^f, A·α = β}``; with the Smith normal form (§4.1) ``Γ(β) = {I·β + K·z}``
when ``C·β = 0``, and the range ``Σ(β)`` of the kernel coordinates ``z`` is read off by
Fourier–Motzkin elimination (§4.2, eq. 45) once per ``K``.  Each element of ``dx`` is then one
independent gather (eq. 47): "one thread per element of the derivative", no atomics.  The
introduction's examples show the cases: a sum over an index the read does not use (``x[i]²``), a
Kronecker delta (``x[i, i]²``), an index to solve for (``exp x[i + j]``, ``exp x[M·i + j]``).  Fig. 3
(``A = (1 −2)``, one kernel dimension) and Fig. 4 (``A = (1 −2 −2)``, two) show ``Σ(β)``; §6
derives the four derivatives of ``f[i, j] = exp(−Σ_k ((a[i,k] + b[j,k])²·c[i,i] + d[i+k]³))``.

What this script does (each claim asserted)
-------------------------------------------
(a) §6: prints ``f.derivative(x)`` for x = a, b, c, d; the values of ``f``, ``f.vjp``, each
    derivative function and the compiled (Numba) kernel equal ``jax.vjp`` of the same function in
    ``jax.numpy`` (float64, rtol 1e-10); ``dd[7] == 0`` exactly (``d[7]`` is never read) and ``dc`` is
    exactly zero off the diagonal for several random inputs; the number of ``df`` elements each
    ``dd[d0]`` gathers — measured by evaluating the derivative on one-hot cotangents — is
    ``4·#{(i, k) : i + k = d0}``, and that count equals ``min(4, d0) − max(0, d0 − 2) + 1``, the size
    of ``jacacc.intlin.nested_bounds``'s range for ``z`` (``i = d0 − z``), an enumeration, and the
    range of the sum in the printed derivative (re-parsed, its bounds evaluated).
(b) Fig. 3: the Smith normal form of ``A = (1 −2)`` gives the caption's ``I = (1, 0)ᵀ`` and
    ``K = (2, 1)ᵀ``; for β = −1, ``Σ(−1) = {1 ≤ z ≤ 3}`` by ``nested_bounds`` (β kept a parameter:
    one elimination for every β) and by enumeration, in the box ``N^f = (6, 4)`` (the extents were
    lost in the text; every box for which the caption's set holds is listed and asserted); for
    every β the points ``I·β + K·z`` are exactly ``{α in the box : A·α = β}``.
(c) Fig. 4: ``A = (1 −2 −2)``; the printed kernel is not one (``A·K ≠ 0``, asserted).  Boxes
    ``1 ≤ α ≤ N`` and unimodular changes of our kernel basis with shifts of the particular solution
    are searched for a parametrization whose ``Σ(3)`` is exactly the caption's 15-point set
    ``{−1 ≤ z2 ≤ 5 ∧ max(−1, −z2) ≤ z1 ≤ min(1, 4 − z2)}``; the result is printed (found or not).
    With it, ``nested_bounds`` (z2 outer) gives the caption's ranges and 15 points, and with our own
    basis the 15 points it gives map onto ``{α in the box : A·α = 3}`` exactly.
(d) The introduction's examples ``x[i]²``, ``x[i, i]²``, ``exp x[i + j]``, ``exp x[M·i + j]`` (and
    overlapping windows ``exp x[M·i + j]`` with j beyond M): value, ``vjp`` and the derivative
    function against NumPy written by hand, the derivative printed, and the number of ``df``
    elements each gradient element gathers against an enumeration of ``Γ(β)``.

Run ``python paper_reproductions/000_elementwise_derivatives.py``; ``main()`` returns 0 when every
check passes (an ``AssertionError`` otherwise).  ``QUICK=1`` in the environment checks fewer random
inputs and a smaller search for Fig. 4 (the tests use it).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import numpy as np

import jacacc.elementwise as ew
from jacacc.elementwise.parse import parse
from jacacc.intlin import LoopBound, nested_bounds, smith_normal_form
from jacacc.kernels.ir import Read, Summation, walk

QUICK = bool(os.environ.get("QUICK"))
RTOL = 1e-10

SECTION_6 = "f[i, j] = exp(-sum(k, 0, 4, (a[i, k] + b[j, k])**2 * c[i, i] + d[i + k]**3))"
SECTION_6_SIZES = {"i": 3, "j": 4}
SECTION_6_SHAPES = {"a": (3, 5), "b": (4, 5), "c": (3, 3), "d": (8,)}


# ----------------------------------------------------------------------------- helpers


def bound_text(bound: LoopBound, names: Mapping[str, str] | None = None) -> str:
    """``max(…) ≤ z ≤ min(…)`` of one loop bound, read the way ``LoopBound.range`` evaluates it
    (lower ``⌈f/a⌉``, upper ``⌊f/b⌋``)."""
    names = names or {}

    def form(f: tuple[dict[str, int], int], d: int, lower: bool) -> str:
        coeffs, const = f
        terms = [f"{'-' if c < 0 else '+'} {'' if abs(c) == 1 else f'{abs(c)}·'}{names.get(v, v)}"
                 for v, c in sorted(coeffs.items())]
        text = " ".join(terms + ([f"{'-' if const < 0 else '+'} {abs(const)}"] if const or not terms else []))
        text = text[2:] if text.startswith("+ ") else "-" + text[2:]
        if d == 1:
            return text
        return f"{'⌈' if lower else '⌊'}({text})/{d}{'⌉' if lower else '⌋'}"

    lo = [form(f, d, True) for d, f in bound.lower]
    hi = [form(f, d, False) for d, f in bound.upper]
    lo_text = lo[0] if len(lo) == 1 else f"max({', '.join(lo)})"
    hi_text = hi[0] if len(hi) == 1 else f"min({', '.join(hi)})"
    return f"{lo_text} ≤ {bound.variable} ≤ {hi_text}"


def box_constraints(particular: Sequence[Mapping[str, int] | int], kernel: Sequence[Sequence[int]],
                    extents: Sequence[int], z: Sequence[str], lowest: int = 1) -> list[tuple[dict[str, int], int]]:
    """``lowest ≤ p + K·z ≤ N`` as ``form ≥ 0`` constraints (eqs. 43–44).

    ``particular[r]`` is an integer or a form ``{parameter: coefficient}`` (the row of ``I·β`` with β
    kept symbolic, so that one Fourier–Motzkin elimination serves every β, as §5.1 points out).
    """
    out = []
    for r, n in enumerate(extents):
        p = particular[r]
        p_coeffs, p_const = (dict(p), 0) if isinstance(p, Mapping) else ({}, int(p))
        row = {name: int(kernel[r][c]) for c, name in enumerate(z)}
        up = {v: row.get(v, 0) + p_coeffs.get(v, 0) for v in set(row) | set(p_coeffs)}
        out.append((up, p_const - lowest))  # p + K z - lowest ≥ 0
        out.append(({v: -c for v, c in up.items()}, n - p_const))  # N - p - K z ≥ 0
    return out


def solutions_in_box(A: Sequence[Sequence[int]], beta: Sequence[int], extents: Sequence[int],
                     lowest: int = 1) -> set[tuple[int, ...]]:
    """``{α : lowest ≤ α ≤ N, A·α = β}`` by enumerating the box."""
    Am = np.asarray(A, dtype=np.int64)
    return {alpha for alpha in itertools.product(*(range(lowest, n + 1) for n in extents))
            if np.array_equal(Am @ np.asarray(alpha), np.asarray(beta))}


def integral_column(pinv: Sequence[Sequence[Fraction]], beta: Sequence[int]) -> list[int]:
    """``I·β``, asserted integral (it is whenever ``A·α = β`` is solvable, §4.1)."""
    out = [sum(Fraction(row[c]) * beta[c] for c in range(len(beta))) for row in pinv]
    assert all(v.denominator == 1 for v in out), f"I·β = {out} is not integral"
    return [int(v) for v in out]


def gather_counts(g: Callable[..., np.ndarray], out_shape: tuple[int, ...], arrays: Mapping[str, np.ndarray],
                  cotangent: str = "df") -> np.ndarray:
    """How many elements of ``df`` each gradient element depends on, measured by evaluating the
    derivative function ``g`` on every one-hot cotangent (the gradient is linear in ``df``)."""
    counts = None
    for alpha in np.ndindex(*out_shape):
        one_hot = np.zeros(out_shape)
        one_hot[alpha] = 1.0
        hit = np.asarray(g(**{cotangent: one_hot}, **arrays)) != 0
        counts = hit.astype(int) if counts is None else counts + hit
    return counts


def preimage_counts(read: Callable[..., tuple[int, ...]], ranges: Mapping[str, range],
                    arg_shape: tuple[int, ...]) -> np.ndarray:
    """``#Γ(β)`` for every β by enumeration: ``read(**α)`` is the index the function reads at α
    (α running over the function's indices and its sums' indices, §5.2)."""
    counts = np.zeros(arg_shape, dtype=int)
    names = list(ranges)
    for values in itertools.product(*(ranges[n] for n in names)):
        counts[read(**dict(zip(names, values, strict=True)))] += 1
    return counts


def close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert np.allclose(got, want, rtol=RTOL, atol=1e-14), f"{what}: max error {np.max(np.abs(got - want)):.3g}"


# ----------------------------------------------------------------------------- (a) §6


def section6_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.uniform(-1, 1, (3, 5)), "b": rng.uniform(-1, 1, (4, 5)), "c": rng.uniform(0, 1, (3, 3)),
            "d": rng.uniform(-1, 1, 8)}


def section6_jax(a, b, c, d):
    """§6's function in jax.numpy."""
    import jax.numpy as jnp

    i = jnp.arange(3)[:, None, None]
    k = jnp.arange(5)[None, None, :]
    terms = (a[:, None, :] + b[None, :, :]) ** 2 * jnp.diagonal(c)[:, None, None] + d[i + k] ** 3
    return jnp.exp(-jnp.sum(terms, axis=2))


def sum_range_of_cotangent_read(definition_text: str, cotangent: str, outer: str) -> Callable[[int], range]:
    """The range of the sum whose index the cotangent's read depends on, besides the derivative's
    own index ``outer`` — read from the printed derivative re-parsed, not from its text."""
    tree = parse(definition_text)
    reads = [n for n in walk(tree.body) if isinstance(n, Read) and n.argument == cotangent]
    assert len(reads) == 1, f"{cotangent} is read {len(reads)} times in {definition_text}"
    names = reads[0].indices[0].names
    assert outer in names, f"the first index of {cotangent} does not depend on {outer}"
    (inner,) = names - {outer}
    (summation,) = [n for n in walk(tree.body) if isinstance(n, Summation) and n.index == inner]

    def count(d0: int) -> range:
        env = {tree.indices[0]: d0}
        lo = max(lim.value(env, True) for lim in summation.lower)
        hi = min(lim.value(env, False) for lim in summation.upper)
        return range(lo, hi + 1)

    return count


def check_section_6() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # the reference must be float64 like jacacc's kernels
    f = ew.define(SECTION_6, SECTION_6_SIZES)
    print("§6:", SECTION_6)
    derivatives = {x: f.derivative(x) for x in "abcd"}
    for g in derivatives.values():
        print(" ", g)
    kernel = f.compile(backend="numba")
    seeds = range(2) if QUICK else range(5)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        arrays = section6_arrays(rng)
        df = rng.standard_normal((3, 4))
        value, pullback = jax.vjp(section6_jax, *(arrays[n] for n in "abcd"))
        reference = dict(zip("abcd", (np.asarray(r) for r in pullback(df)), strict=True))
        close(f(**arrays), value, "f")
        close(kernel(**arrays), value, "compiled f")
        gradients = f.vjp(df, **arrays)
        compiled = kernel.vjp(df, **arrays)
        for x in "abcd":
            close(gradients[x], reference[x], f"f.vjp d{x}")
            close(derivatives[x](df=df, **arrays), reference[x], f"f.derivative({x!r})")
            close(compiled[x], reference[x], f"compiled vjp d{x}")
        for dd in (gradients["d"], compiled["d"], derivatives["d"](df=df, **arrays)):
            assert dd[7] == 0.0, f"d[7] is never read (i + k ≤ 6) but dd[7] = {dd[7]!r}"
        off_diagonal = ~np.eye(3, dtype=bool)
        for dc in (gradients["c"], compiled["c"], derivatives["c"](df=df, **arrays)):
            assert np.all(dc[off_diagonal] == 0.0), "c is read on its diagonal only: dc must vanish off it"
    print(f"  values, vjp, derivative functions and the compiled kernel equal jax.vjp (rtol {RTOL:g}) "
          f"for {len(seeds)} random inputs; dd[7] == 0 and dc == 0 off the diagonal exactly")

    # how many df elements dd[d0] gathers: i + k = d0 with 0 ≤ i ≤ 2, 0 ≤ k ≤ 4, for each of the 4 j
    arrays = section6_arrays(np.random.default_rng(10))
    measured = gather_counts(derivatives["d"], (3, 4), arrays)
    enumerated = preimage_counts(lambda i, j, k: (i + k,), {"i": range(3), "j": range(4), "k": range(5)}, (8,))
    # z is the kernel coordinate: k = z, i = d0 − z (the §6 output's sum over z)
    constraints = [({"z": 1}, 0), ({"z": -1}, 4), ({"d0": 1, "z": -1}, 0), ({"d0": -1, "z": 1}, 2)]
    nest = nested_bounds(constraints, ["z"])
    printed_range = sum_range_of_cotangent_read(str(derivatives["d"]), "df", "dd0")
    print(f"  Fourier–Motzkin range of z for dd[d0]: {bound_text(nest.bounds[0])}")
    for d0 in range(8):
        formula = max(0, min(4, d0) - max(0, d0 - 2) + 1)
        by_nest = len(nest.points({"d0": d0}))
        by_enumeration = sum(1 for i in range(3) for k in range(5) if i + k == d0)
        by_printed = len(printed_range(d0))
        assert formula == by_nest == by_enumeration == by_printed, (d0, formula, by_nest, by_enumeration, by_printed)
        assert measured[d0] == enumerated[d0] == 4 * formula, (d0, measured[d0], enumerated[d0], formula)
    print(f"  df elements gathered by dd[d0], d0 = 0…7: {measured.tolist()} = 4·(min(4, d0) − max(0, d0 − 2) + 1) "
          "(one-hot evaluation = enumeration = nested_bounds = the printed sum's range)")


# ----------------------------------------------------------------------------- (b) Fig. 3

FIG3_A = [[1, -2]]
FIG3_BETA = -1
FIG3_SIGMA = {1, 2, 3}  # the caption's Σ(−1), in the paper's kernel coordinate (K = (2, 1)ᵀ)
# The extents N^f of Fig. 3 were lost in the text extraction.  α = (2z − 1, z) runs inside the box
# for 1 ≤ z ≤ 3 exactly when 5 ≤ N1 ≤ 6 and N2 ≥ 3, or N1 ≥ 7 and N2 = 3 (asserted below); we draw
# N^f = (6, 4), where both upper limits cut the line between lattice points (z ≤ 3.5 and z ≤ 4).
FIG3_BOX = (6, 4)


def sigma_1d(kernel_sign: int, particular: Sequence, kernel: Sequence[Sequence[int]], box: Sequence[int],
             beta: int) -> tuple[set[int], LoopBound]:
    """Σ(β) in the paper's coordinate by nested_bounds, with β a parameter of the elimination."""
    nest = nested_bounds(box_constraints(particular, kernel, box, ["z"]), ["z"])
    return {kernel_sign * p["z"] for p in nest.points({"beta": beta})}, nest.bounds[0]


def check_figure_3() -> None:
    snf = smith_normal_form(FIG3_A)
    pinv, K, C = snf.pseudo_inverse(), snf.kernel(), snf.cokernel()
    print(f"\nFig. 3: A = {FIG3_A}: S = {snf.S}, I = {[[str(v) for v in r] for r in pinv]}, K = {K}, C = {C}")
    assert C == [] and snf.rank == 1
    assert [list(r) for r in pinv] == [[1], [0]], "the caption's pseudo-inverse Iᵀ = (1 0)"
    # a one-dimensional kernel basis is unique up to sign: map ours onto the paper's K = (2, 1)ᵀ
    assert K in ([[2], [1]], [[-2], [-1]]), K
    sign = 1 if K == [[2], [1]] else -1
    particular = [{"beta": int(pinv[r][0])} for r in range(2)]  # I·β with β symbolic

    sigma, bound = sigma_1d(sign, particular, K, FIG3_BOX, FIG3_BETA)
    p = integral_column(pinv, [FIG3_BETA])
    enumerated = {z for z in range(-20, 21)
                  if all(1 <= p[r] + K[r][0] * sign * z <= FIG3_BOX[r] for r in range(2))}
    print(f"  N^f = {FIG3_BOX}: Fourier–Motzkin: {bound_text(bound, {'beta': 'β'})}; "
          f"Σ(−1) = {sorted(sigma)} (enumeration {sorted(enumerated)})")
    assert sigma == enumerated == FIG3_SIGMA
    points = {tuple(p[r] + K[r][0] * sign * z for r in range(2)) for z in sigma}
    assert points == solutions_in_box(FIG3_A, [FIG3_BETA], FIG3_BOX) == {(1, 1), (3, 2), (5, 3)}
    print(f"  α = Iβ + Kz for z in Σ(−1): {sorted(points)} = {{α in the box : α1 − 2·α2 = −1}}")

    # which boxes reproduce the caption: those the comment at FIG3_BOX names
    good = {(n1, n2) for n1 in range(1, 9) for n2 in range(1, 9)
            if sigma_1d(sign, particular, K, (n1, n2), FIG3_BETA)[0] == FIG3_SIGMA}
    expected = {(n1, n2) for n1 in range(1, 9) for n2 in range(1, 9)
                if (5 <= n1 <= 6 and n2 >= 3) or (n1 >= 7 and n2 == 3)}
    assert good == expected, sorted(good ^ expected)
    print(f"  boxes (N1, N2 ≤ 8) with Σ(−1) = {{1, 2, 3}}: 5 ≤ N1 ≤ 6 and N2 ≥ 3, or N1 ≥ 7 and N2 = 3 "
          f"({len(good)} boxes)")

    # the same elimination (β symbolic) for every β: Γ(β) exactly
    for beta in range(-2 * FIG3_BOX[1] - 2, FIG3_BOX[0] + 2):
        nest = nested_bounds(box_constraints(particular, K, FIG3_BOX, ["z"]), ["z"])
        p = integral_column(pinv, [beta])
        got = {tuple(p[r] + K[r][0] * q["z"] for r in range(2)) for q in nest.points({"beta": beta})}
        assert got == solutions_in_box(FIG3_A, [beta], FIG3_BOX), beta
    print("  one elimination with β symbolic gives Γ(β) exactly for every β")


# ----------------------------------------------------------------------------- (c) Fig. 4

FIG4_A = [[1, -2, -2]]
FIG4_BETA = 3
FIG4_PAPER_I = [[1], [0], [0]]
FIG4_PAPER_K = [[2, 0], [1, 1], [2, 1]]  # as printed: A·K = (−4, −4), not a kernel


def caption_sigma() -> set[tuple[int, int]]:
    """The caption's Σ(3) = {−1 ≤ z2 ≤ 5 ∧ max(−1, −z2) ≤ z1 ≤ min(1, 4 − z2)} as (z1, z2) points."""
    return {(z1, z2) for z2 in range(-1, 6) for z1 in range(max(-1, -z2), min(1, 4 - z2) + 1)}


def kernel_coordinates(K: Sequence[Sequence[int]], offset: Sequence[int], alpha: Sequence[int]) -> tuple[int, ...]:
    """The unique integer ``w`` with ``α = offset + K·w`` (K has full column rank), asserted exact."""
    Km = np.asarray(K, dtype=float)
    w = np.rint(np.linalg.lstsq(Km, np.asarray(alpha, float) - np.asarray(offset, float), rcond=None)[0]).astype(int)
    assert np.array_equal(np.asarray(K) @ w + np.asarray(offset), np.asarray(alpha)), (K, offset, alpha)
    return tuple(int(v) for v in w)


def unimodular_2x2(limit: int) -> list[np.ndarray]:
    """Every 2 × 2 integer matrix with entries in [−limit, limit] and determinant ±1."""
    out = []
    for a, b, c, d in itertools.product(range(-limit, limit + 1), repeat=4):
        if abs(a * d - b * c) == 1:
            out.append(np.array([[a, b], [c, d]]))
    return out


def search_figure_4(K: Sequence[Sequence[int]], p: Sequence[int], n1_max: int, n_max: int,
                    t_limit: int) -> list[dict]:
    """Boxes ``1 ≤ α ≤ N`` and parametrizations ``α = p' + K'·z`` (``K' = K·T``, T unimodular,
    ``p' = p + K·t``) under which ``Σ(3)`` is exactly the caption's set.

    ``α = p + K·w`` with ``w`` our kernel coordinates; ``z ↦ w = t + T·z`` must map the caption's
    set onto ``{w : α(w) in the box}``.  A translation matches the lexicographically smallest
    points, so for each T one candidate t is checked.
    """
    target = sorted(caption_sigma())
    transforms = unimodular_2x2(t_limit)
    images = [(T, sorted(tuple(int(v) for v in T @ np.asarray(z)) for z in target)) for T in transforms]
    matches = []
    for n1, n2, n3 in itertools.product(range(1, n1_max + 1), range(1, n_max + 1), range(1, n_max + 1)):
        gamma = solutions_in_box(FIG4_A, [FIG4_BETA], (n1, n2, n3)) if n2 * n3 >= 15 else set()
        if len(gamma) != len(target):
            continue
        w_set = sorted(kernel_coordinates(K, p, alpha) for alpha in gamma)
        for T, image in images:
            t = np.asarray(w_set[0]) - np.asarray(image[0])
            if sorted(tuple(int(v) for v in np.asarray(q) + t) for q in image) == w_set:
                Kp = (np.asarray(K) @ T).tolist()
                pp = (np.asarray(p) + np.asarray(K) @ t).tolist()
                matches.append({"box": (n1, n2, n3), "K": Kp, "p": pp})
    return matches


def check_figure_4() -> None:
    snf = smith_normal_form(FIG4_A)
    pinv, K = snf.pseudo_inverse(), snf.kernel()
    print(f"\nFig. 4: A = {FIG4_A}: I = {[[str(v) for v in r] for r in pinv]}, K = {K}")
    assert [list(r) for r in pinv] == FIG4_PAPER_I, "the caption's pseudo-inverse I = (1 0 0)ᵀ"
    assert np.all(np.asarray(FIG4_A) @ np.asarray(K) == 0) and snf.rank == 1
    printed = (np.asarray(FIG4_A) @ np.asarray(FIG4_PAPER_K)).tolist()
    assert printed != [[0, 0]], "the printed kernel should be inconsistent"
    print(f"  the caption's K = {FIG4_PAPER_K} is not a kernel: A·K = {printed}")
    sigma = caption_sigma()
    assert len(sigma) == 15
    p = integral_column(pinv, [FIG4_BETA])

    # the search: α1 = 3 + 2·(α2 + α3) ≥ 7 in a one-based box, so N1 must reach beyond 8
    n1_max, n_max, t_limit = (21, 6, 1) if QUICK else (30, 8, 2)
    matches = search_figure_4(K, p, n1_max, n_max, t_limit)
    boxes = sorted({m["box"] for m in matches})
    print(f"  search over boxes N1 ≤ {n1_max}, N2, N3 ≤ {n_max} and kernel bases K·T (T unimodular, "
          f"entries in [−{t_limit}, {t_limit}]) with shifted particular solutions: {len(matches)} exact "
          f"parametrizations of the caption's Σ(3), in {len(boxes)} boxes")
    assert matches, "no box and kernel basis reproduce the caption's Σ(3)"
    assert all(m["box"][1:] in ((3, 5), (5, 3)) and m["box"][0] >= 19 for m in matches), boxes
    best = min(matches, key=lambda m: (int(np.abs(np.asarray(m["K"]) - np.asarray(FIG4_PAPER_K)).sum()),
                                       m["box"], m["K"]))
    print(f"  exact match found; closest to the printed K: N^f = {best['box']}, α = {best['p']} + {best['K']}·z "
          f"(the smallest boxes are N^f = {boxes[0]}: α1 = 3 + 2(α2 + α3) ≤ 19 never cuts)")

    # with it, Fourier–Motzkin (z2 outer, z1 inner) gives the caption's ranges and points
    nest = nested_bounds(box_constraints(best["p"], best["K"], best["box"], ["z1", "z2"]), ["z2", "z1"])
    print("  nested_bounds:", " ; ".join(bound_text(b) for b in nest.bounds))
    points = {(q["z1"], q["z2"]) for q in nest.points()}
    assert points == sigma
    assert nest.bounds[0].range({}) == range(-1, 6), nest.bounds[0].range({})
    for z2 in range(-1, 6):
        assert nest.bounds[1].range({"z2": z2}) == range(max(-1, -z2), min(1, 4 - z2) + 1), z2
    gamma = solutions_in_box(FIG4_A, [FIG4_BETA], best["box"])
    alphas = {tuple(int(v) for v in np.asarray(best["p"]) + np.asarray(best["K"]) @ np.asarray(z)) for z in points}
    assert alphas == gamma and len(gamma) == 15
    print("  its Σ(3): −1 ≤ z2 ≤ 5 and, for each z2, max(−1, −z2) ≤ z1 ≤ min(1, 4 − z2) — the caption's "
          "15 points; α over them = {α in the box : A·α = 3}")

    # with our own basis (β symbolic): 15 points, exactly the enumeration of the box
    particular = [{"beta": int(pinv[r][0])} for r in range(3)]
    own = nested_bounds(box_constraints(particular, K, best["box"], ["w1", "w2"]), ["w2", "w1"])
    own_points = own.points({"beta": FIG4_BETA})
    own_alphas = {tuple(p[r] + sum(K[r][c] * q[f"w{c + 1}"] for c in range(2)) for r in range(3)) for q in own_points}
    assert len(own_points) == 15 and own_alphas == gamma
    print(f"  with our basis K = {K}: {' ; '.join(bound_text(b, {'beta': 'β'}) for b in own.bounds)}; "
          f"{len(own_points)} points, = {{α in the box : A·α = 3}}")


# ----------------------------------------------------------------------------- (d) the introduction


def anti_diagonal_gradient(x: np.ndarray, df: np.ndarray) -> np.ndarray:
    n, m = df.shape
    return np.array([sum(df[i, t - i] for i in range(n) if 0 <= t - i < m) for t in range(x.size)]) * np.exp(x)


def strided_gradient(x: np.ndarray, df: np.ndarray, stride: int) -> np.ndarray:
    out = np.zeros_like(x)
    n, m = df.shape
    for i in range(n):
        for j in range(m):
            out[stride * i + j] += df[i, j] * np.exp(x[stride * i + j])
    return out


INTRO = [
    # (source, sizes, x's shape, value, gradient (x, df), the read map for the gather counts, paper's point)
    ("f[i, j] = x[i]**2", {"i": 3, "j": 4}, (3,),
     lambda x: np.repeat(x[:, None] ** 2, 4, axis=1), lambda x, df: 2 * x * df.sum(axis=1),
     lambda i, j: (i,), "a sum over j, which x's index does not use"),
    ("f[i] = x[i, i]**2", {"i": 3}, (3, 3),
     lambda x: np.diag(x) ** 2, lambda x, df: np.diag(2 * np.diag(x) * df),
     lambda i: (i, i), "a Kronecker delta: zero off the diagonal"),
    ("f[i, j] = exp(x[i + j])", {"i": 3, "j": 4}, (6,),
     lambda x: np.exp(x[np.arange(3)[:, None] + np.arange(4)[None, :]]), anti_diagonal_gradient,
     lambda i, j: (i + j,), "j = t − i substituted, the sum's range chosen"),
    ("f[i, j] = exp(x[4*i + j])", {"i": 3, "j": 4}, (12,),
     lambda x: np.exp(x.reshape(3, 4)), lambda x, df: strided_gradient(x, df, 4),
     lambda i, j: (4 * i + j,), "M = 4: one term per element (j = t − M·i)"),
    ("f[i, j] = exp(x[4*i + j])", {"i": 3, "j": 6}, (14,),
     lambda x: np.exp(x[4 * np.arange(3)[:, None] + np.arange(6)[None, :]]),
     lambda x, df: strided_gradient(x, df, 4), lambda i, j: (4 * i + j,), "M = 4, windows of 6 overlap"),
]


def check_intro() -> None:
    print("\nthe introduction's examples:")
    rng = np.random.default_rng(20)
    for source, sizes, shape, value, gradient, read, point in INTRO:
        f = ew.define(source, sizes)
        g = f.derivative("x", shape)  # with x's shape: factors move out of sums that are never empty
        x = rng.uniform(-1, 1, shape)
        df = rng.standard_normal(f.shape)
        close(f(x=x), value(x), source)
        close(f.vjp(df, x=x)["x"], gradient(x, df), f"{source}: vjp")
        close(g(df=df, x=x), gradient(x, df), f"{source}: derivative function")
        measured = gather_counts(g, f.shape, {"x": x})
        enumerated = preimage_counts(read, {n: range(e) for n, e in sizes.items()}, shape)
        assert np.array_equal(measured, enumerated), (source, measured, enumerated)
        print(f"  {source}  {sizes}: {point}\n    {g}\n    df elements gathered per x element: "
              f"{measured.ravel().tolist()}")
    print("  values, vjp and derivative functions equal NumPy written by hand; gather counts = #Γ(β)")


def main() -> int:
    check_section_6()
    check_figure_3()
    check_figure_4()
    check_intro()
    print("\nall paper 000 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
