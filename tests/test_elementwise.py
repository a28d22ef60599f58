"""jacacc.elementwise (paper 000, in progress): parsing, evaluation and vector-Jacobian products.

Values and gradients against NumPy written by hand and JAX's ``vjp`` of the
same function; malformed sources refused naming the problem and its column.
"""

from __future__ import annotations

import numpy as np
import pytest

from jacacc.elementwise import SourceError, define, parse

pytestmark = pytest.mark.usefixtures("float64_jax")

SECTION_6 = "f[i, j] = exp(-sum(k, 0, 4, (a[i, k] + b[j, k])**2 * c[i, i] + d[i + k]**3))"


def section_6_arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.uniform(-1, 1, (3, 5)), "b": rng.uniform(-1, 1, (4, 5)), "c": rng.uniform(0, 1, (3, 3)),
            "d": rng.uniform(-1, 1, 8)}


def section_6_jax(a, b, c, d):
    import jax.numpy as jnp

    i = jnp.arange(3)[:, None, None]
    k = jnp.arange(5)[None, None, :]
    terms = (a[:, None, :] + b[None, :, :]) ** 2 * jnp.diagonal(c)[:, None, None] + d[i + k] ** 3
    return jnp.exp(-jnp.sum(terms, axis=2))


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_section_6_example_against_jax(backend):
    import jax

    arrays = section_6_arrays(np.random.default_rng(0))
    f = define(SECTION_6, {"i": 3, "j": 4}, backend=backend)
    value, pullback = jax.vjp(section_6_jax, *(arrays[n] for n in "abcd"))
    assert np.allclose(f(**arrays), value, rtol=1e-12)
    df = np.random.default_rng(1).standard_normal((3, 4))
    ours = f.vjp(df, **arrays)
    for name, reference in zip("abcd", pullback(df), strict=True):
        assert ours[name].shape == arrays[name].shape
        assert np.allclose(ours[name], reference, rtol=1e-10, atol=1e-12), name
    assert ours["d"][7] == 0.0  # d[7] is never read (i + k ≤ 6): exactly zero
    off_diagonal = ~np.eye(3, dtype=bool)
    assert np.all(ours["c"][off_diagonal] == 0.0)  # c is read on its diagonal only


@pytest.mark.parametrize("source, sizes, arrays, expected_value, expected_gradient", [
    # f_ij = x_i²: the gradient sums over j
    ("f[i, j] = x[i]**2", {"i": 3, "j": 4}, {"x": np.array([1.0, 2.0, 3.0])},
     lambda x: np.repeat(x[:, None] ** 2, 4, axis=1), lambda x, df: 2 * x * df.sum(axis=1)),
    # f_i = x_ii²: a Kronecker delta
    ("f[i] = x[i, i]**2", {"i": 3}, {"x": np.arange(9.0).reshape(3, 3)},
     lambda x: np.diag(x) ** 2, lambda x, df: np.diag(2 * np.diag(x) * df)),
    # f_ij = exp(x_{i+j}): the gradient gathers along anti-diagonals
    ("f[i, j] = exp(x[i + j])", {"i": 3, "j": 4}, {"x": np.linspace(0, 1, 6)},
     lambda x: np.exp(x[np.arange(3)[:, None] + np.arange(4)[None, :]]),
     lambda x, df: np.array([sum(df[i, m - i] for i in range(3) if 0 <= m - i < 4) for m in range(6)]) * np.exp(x)),
    # f_ij = exp(x_{M·i + j}), M = 4: a flattened index
    ("f[i, j] = exp(x[4*i + j])", {"i": 3, "j": 4}, {"x": np.linspace(0, 1, 12)},
     lambda x: np.exp(x.reshape(3, 4)), lambda x, df: (df * np.exp(x.reshape(3, 4))).ravel()),
    # a sum with an index-dependent bound: a cumulative sum
    ("f[i] = sum(k, 0, i, x[k])", {"i": 5}, {"x": np.arange(1.0, 6.0)},
     np.cumsum, lambda x, df: np.cumsum(df[::-1])[::-1]),
    # an argument read under several maps (and a non-unimodular one): the gradient adds them
    ("f[i] = x[i] * x[i + 1] - x[2*i]", {"i": 3}, {"x": np.arange(1.0, 7.0)},
     lambda x: x[:3] * x[1:4] - x[0:6:2],
     lambda x, df: np.bincount(np.arange(3), df * x[1:4], 6) + np.bincount(np.arange(1, 4), df * x[:3], 6)
     - np.bincount(2 * np.arange(3), df, 6)),
    # constant exponent: negative bases are fine, negative exponents too
    ("f[i] = x[i]**3 + x[i]**-2 + abs(x[i])", {"i": 3}, {"x": np.array([-2.0, 0.5, 3.0])},
     lambda x: x**3 + x**-2.0 + np.abs(x), lambda x, df: df * (3 * x**2 - 2 * x**-3.0 + np.sign(x))),
])
def test_intro_examples(source, sizes, arrays, expected_value, expected_gradient):
    f = define(source, sizes, backend="python")
    (name, x), = arrays.items()
    assert np.allclose(f(**arrays), expected_value(x))
    df = np.random.default_rng(2).standard_normal(f.shape)
    assert np.allclose(f.vjp(df, **arrays)[name], expected_gradient(x, df))


@pytest.mark.parametrize("source, sizes, message", [
    ("f[i] = foo(x[i])", {"i": 3}, "unknown function foo .* at column 7"),
    ("f[i, j] = x[i*j]", {"i": 3, "j": 3}, "not affine in the indices .* at column 12"),
    ("f[i, j] = x[i]", {"i": 3}, "the index j has no extent .* at column 5"),
    ("f[i] = sum(k, 0, i*i, x[k])", {"i": 3}, "the sum bound is not affine .* at column 17"),
    ("f[i] = sum(k, 0, y, x[k])", {"i": 3}, "the sum bound uses y, which is not an index in scope at column 17"),
    ("f[i] = x[i] ** x[i]", {"i": 3}, "the exponent x\\[i\\] must be a constant number at column 15"),
    ("f[i] = i * x[i]", {"i": 3}, "i is an index and cannot be used as a value .* at column 7"),
    ("f[i] = x[i] +", {"i": 3}, "not a definition"),
    ("f[i] == x[i]", {"i": 3}, "one definition"),
    ("f[i] = f[i]", {"i": 3}, "reads f itself"),
    ("f[i] = sum(i, 0, 2, x[i])", {"i": 3}, "the summation index i is already bound"),
])
def test_malformed_sources_are_refused_with_their_position(source, sizes, message):
    with pytest.raises(SourceError, match=message):
        define(source, sizes)


def test_shape_mismatches_are_refused_naming_the_read():
    f = define("f[i] = x[i + 1] * y[i, i]", {"i": 4}, backend="python")
    with pytest.raises(SourceError, match="x\\[i \\+ 1\\] can read index beyond 3 on axis 0 .* at column 7"):
        f(x=np.ones(4), y=np.ones((4, 4)))
    with pytest.raises(SourceError, match="y is read with 2 indices but its array has shape \\(4,\\)"):
        f(x=np.ones(5), y=np.ones(4))
    with pytest.raises(SourceError, match="no array given for the argument 'y'"):
        f(x=np.ones(5))
    with pytest.raises(SourceError, match="the cotangent df must have shape \\(4,\\)"):
        f.vjp(np.ones(3), x=np.ones(5), y=np.ones((4, 4)))
    # a read kept in range by the sum's bounds is accepted
    g = define("g[i] = sum(k, 0, 3 - i, x[i + k])", {"i": 4}, backend="python")
    assert np.allclose(g(x=np.arange(4.0)), [6.0, 6.0, 5.0, 3.0])


def test_parse_tree():
    d = parse(SECTION_6)
    assert d.name == "f" and d.indices == ("i", "j")
    assert d.arguments() == {"a": 2, "b": 2, "c": 2, "d": 1}
