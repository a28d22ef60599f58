"""jacacc.elementwise (paper 000, in progress): parsing, evaluation and vector-Jacobian products.

Values and gradients against NumPy written by hand and JAX's ``vjp`` of the
same function; malformed sources refused naming the problem and its column.
"""

from __future__ import annotations

import shutil

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


# under Numba the example's kernels compile for 8 s: exhaustive (make test-extra); the python backend
# runs the same check in make test, and the Numba backend is checked there on smaller functions
@pytest.mark.parametrize("backend", ["python", pytest.param("numba", marks=pytest.mark.exhaustive)])
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


# ----------------------------------------------------------------------------- gather-form derivatives (§5, §6)
def test_section_6_derivatives_print_as_in_the_paper():
    f = define(SECTION_6, {"i": 3, "j": 4}, backend="python")
    shapes = {"a": (3, 5), "b": (4, 5), "c": (3, 3), "d": (8,)}
    text = {n: str(f.derivative(n, shapes[n])) for n in "abcd"}
    # da sums over j, db over i; the read's own indices are substituted
    assert "sum(j, 0, 3, df[da0, j] * " in text["a"] and "sum(i" not in text["a"]
    assert "sum(i, 0, 2, df[i, db0] * " in text["b"] and "sum(j" not in text["b"]
    # dc is a Kronecker delta: the cokernel condition of c[i, i]
    assert text["c"].startswith("dc[dc0, dc1] = [dc0 == dc1] * ")
    # dd substitutes i = dd0 - z with max(0, dd0 - 2) ≤ z ≤ min(4, dd0)
    assert "sum(z, max(0, dd0 - 2), min(4, dd0), " in text["d"] and "df[dd0 - z, j]" in text["d"]
    # the derivatives vjp evaluates read the forward sum instead of computing it again
    assert "df[dd0 - z, j] * f_v1[dd0 - z, j]" in str(f.gather("d", shapes["d"]))
    assert list(f.tape()) == ["f_v0", "f_v1"] and str(f.tape()["f_v1"]) == "f_v1[i, j] = exp(-f_v0[i, j])"
    # without the shapes, the ranges of the read indices stay as brackets
    assert str(f.derivative("a")).startswith("da[da0, da1] = [da0 <= 2 and da1 <= 4] * ")


SOURCES = [
    (SECTION_6, {"i": 3, "j": 4}, {"a": (3, 5), "b": (4, 5), "c": (3, 3), "d": (8,)}),
    ("f[i] = x[2*i]**2 * x[i] + sum(k, 0, i, x[k + i])", {"i": 3}, {"x": (6,)}),
    ("f[i, j] = tanh(y[i - 2*j + 4] * x[3*i + j])", {"i": 3, "j": 3}, {"y": (7,), "x": (9,)}),
    ("f[s, t] = x[3*s + t] * y[t, t] + sin(x[5 - s]) / (2 + cos(y[0, t]))", {"s": 2, "t": 3},
     {"x": (6,), "y": (3, 3)}),
    ("f[i] = sum(k, max(0, i - 1), min(3, i + 1), exp(x[k, i]) * x[k, k]) + [i % 2 == 0] * y[i // 2]",
     {"i": 4}, {"x": (4, 4), "y": (2,)}),
    ("f[i, j] = [i <= j] * sum(k, ceil(i / 2), floor((j + 1) / 2), x[i + k] * x[(j + k) // 2])", {"i": 3, "j": 3},
     {"x": (6,)}),
]


def _arrays(shapes, rng):
    return {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}


def _central_difference(fun, arrays, name, weight, h=1e-6):
    grad = np.zeros_like(arrays[name])
    for idx in np.ndindex(grad.shape):
        plus = {k: v.copy() for k, v in arrays.items()}
        minus = {k: v.copy() for k, v in arrays.items()}
        plus[name][idx] += h
        minus[name][idx] -= h
        grad[idx] = (np.sum(weight * fun(**plus)) - np.sum(weight * fun(**minus))) / (2 * h)
    return grad


@pytest.mark.parametrize("source, sizes, shapes", SOURCES)
def test_gather_derivatives_equal_the_adjoint_and_central_differences(source, sizes, shapes):
    rng = np.random.default_rng(3)
    f = define(source, sizes, backend="python")
    arrays = _arrays(shapes, rng)
    df = rng.standard_normal(f.shape)
    ours = f.vjp(df, **arrays)
    for name in shapes:
        assert np.allclose(ours[name], _central_difference(f, arrays, name, df), atol=1e-6), name
    if "%" not in source and "//" not in source:  # paper 001's adjoint: no floor division there
        reference = f.adjoint_vjp(df, **arrays)
        for name in shapes:
            assert np.allclose(ours[name], reference[name], rtol=1e-12, atol=1e-13), name


@pytest.mark.parametrize("source, sizes, shapes", SOURCES)
def test_second_order_derivatives_equal_central_differences(source, sizes, shapes):
    rng = np.random.default_rng(4)
    f = define(source, sizes, backend="python")
    arrays = _arrays(shapes, rng)
    inputs = {**arrays, "df": rng.standard_normal(f.shape)}
    for name in shapes:
        g = f.derivative(name)
        dg = rng.standard_normal(shapes[name])
        second = g.vjp(dg, **inputs)
        assert set(second) == set(g.arguments) and "df" in second
        for other, value in second.items():
            assert np.allclose(value, _central_difference(g, inputs, other, dg), atol=1e-5), (name, other)


@pytest.mark.parametrize("source, sizes, shapes", SOURCES)
def test_printed_derivatives_parse_back_and_evaluate_alike(source, sizes, shapes):
    from jacacc.elementwise import ElementwiseFunction, unparse

    rng = np.random.default_rng(5)
    f = define(source, sizes, backend="python")
    inputs = {**_arrays(shapes, rng), "df": rng.standard_normal(f.shape)}
    for name in shapes:
        g = f.derivative(name)
        again = parse(str(g))
        assert unparse(again) == str(g)
        h = ElementwiseFunction(again, dict.fromkeys(again.indices), backend="python", shape_of=name)
        assert np.array_equal(h(**inputs), g(**inputs))
        h = g.derivative("df")  # third order: still the language
        for argument in h.arguments:
            assert parse(str(h.derivative(argument))).name == "d" + argument


def test_brackets_and_quotients_evaluate_by_their_definition():
    f = define("f[i, j] = [i % 3 == 1 and i <= 2*j] * x[(i + 1) // 3, j] + [i == j] * 2", {"i": 7, "j": 3},
               backend="python")
    x = np.random.default_rng(6).uniform(size=(3, 3))
    expected = np.array([[(x[(i + 1) // 3, j] if i % 3 == 1 and i <= 2 * j else 0.0) + 2.0 * (i == j)
                          for j in range(3)] for i in range(7)])
    assert np.array_equal(f(x=x), expected)


def test_compiled_numba_kernels_match_the_reference():
    source, sizes, shapes = SOURCES[4]
    rng = np.random.default_rng(7)
    f = define(source, sizes, backend="python")
    arrays = _arrays(shapes, rng)
    df = rng.standard_normal(f.shape)
    k = define(source, sizes).compile("numba")
    assert np.allclose(k(**arrays), f(**arrays), rtol=1e-14)
    reference = f.vjp(df, **arrays)
    ours = k.vjp(df, **arrays)
    for name in shapes:
        assert np.allclose(ours[name], reference[name], rtol=1e-13, atol=1e-15), name
    assert set(k.sources) == {"f", "dx", "dy", *f.tape()} and "prange" in k.sources["dx"]


def _cuda_sources():
    from jacacc.elementwise.compiled import CompiledFunction

    for source, sizes, shapes in SOURCES:
        f = define(source, sizes, backend="python")
        yield f, shapes, CompiledFunction(f, "cupy")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_sources_compile_with_nvcc():
    from jacacc.kernels import cuda_ptx_many

    named = [(name, src) for _, _, k in _cuda_sources() for name, src in k.sources.items()]
    entries = cuda_ptx_many([src for _, src in named])  # one nvcc run: about a second each saved
    for (name, _), found in zip(named, entries, strict=True):
        assert len(found) == 1, name


def test_cuda_ptx_reads_back_what_it_compiled_and_names_what_nvcc_refuses(tmp_path):
    from jacacc.kernels import CUDA_KERNEL_NAME, CudaCompileError, cuda_ptx, cuda_source

    with pytest.raises(FileNotFoundError, match="no-such-nvcc is not installed"):
        cuda_ptx("", tmp_path, compiler="no-such-nvcc")
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed")
    source = cuda_source(parse("f[i] = exp(x[i]) * 2"), ["x"], {"x": 1})
    ptx = cuda_ptx(source, tmp_path)
    assert f".entry {CUDA_KERNEL_NAME}(" in ptx
    (build,) = tmp_path.iterdir()
    (build / "kernel.ptx").write_text(ptx + "// read back")
    assert cuda_ptx(source, tmp_path).endswith("// read back")  # the same source is not compiled again
    with pytest.raises(CudaCompileError, match=r"(?s)nvcc --ptx failed.*exq.*the source begins"):
        cuda_ptx(source.replace("exp(", "exq("), tmp_path)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_cuda_kernels_run_on_the_host_match_the_reference():
    """The CUDA kernel body is plain C++ over CUDA's math overloads: run thread by thread on the
    host (:func:`jacacc.kernels.host_kernel`, g++ behind a launch shim) against the reference."""
    from jacacc.elementwise import ElementwiseFunction
    from jacacc.kernels import host_kernel

    rng = np.random.default_rng(8)
    for f, shapes, k in _cuda_sources():
        inputs = {**_arrays(shapes, rng), "df": rng.standard_normal(f.shape)}
        tape_shapes = {name: f.tape_shape(name, f.shapes_of(inputs)) for name in f.tape()}
        for name, definition in f.tape().items():
            sizes = dict(zip(definition.indices, tape_shapes[name], strict=True))
            inputs[name] = ElementwiseFunction(definition, sizes, "python")(**inputs)
        for name, src in k.sources.items():
            definition = k.definitions[name]
            argument = name[1:] if name.startswith("d") and name[1:] in shapes else None
            out_shape = tape_shapes.get(name, f.shape) if argument is None else shapes[argument]
            g = ElementwiseFunction(definition, dict(zip(definition.indices, out_shape, strict=True)), "python",
                                    shape_of=argument)
            arrays = [np.ascontiguousarray(inputs[a], dtype=np.float64) for a in g.arguments]
            extents = len(out_shape) + sum(a.ndim for a in arrays)
            out = np.full(out_shape, np.nan)
            host_kernel(src, len(arrays), extents)(out, *arrays)  # built once per machine (kernel cache)
            assert np.allclose(out, g(**inputs), rtol=1e-13, atol=1e-15), (f.definition.source, name)


@pytest.mark.gpu
def test_cupy_kernels_match_the_reference(cupy_gpu):
    cp = cupy_gpu
    rng = np.random.default_rng(9)
    for f, shapes, _ in _cuda_sources():
        arrays = _arrays(shapes, rng)
        df = rng.standard_normal(f.shape)
        k = f.compile("cupy")
        assert np.allclose(k(**arrays), f(**arrays), rtol=1e-13)
        reference = f.vjp(df, **arrays)
        on_device = k.vjp(cp.asarray(df), **{n: cp.asarray(v) for n, v in arrays.items()})
        for name in shapes:
            assert isinstance(on_device[name], cp.ndarray)
            assert np.allclose(cp.asnumpy(on_device[name]), reference[name], rtol=1e-12, atol=1e-14), name


@pytest.mark.parametrize("source, message", [
    ("f[i] = x[i] * [i < 2] * 2", "a bracket \\[i < 2\\] must be the left factor of a product.* at column 14"),
    ("f[i] = [i] * x[i]", "a bracket condition must compare index expressions"),
    ("f[i] = [i % 0 == 0] * x[i]", "a modulus must be a positive integer constant"),
    ("f[i] = [i % 2 <= 1] * x[i]", "a congruence reads n % m == r"),
    ("f[i] = x[i // 0]", "a floor division's divisor must be a positive integer constant"),
    ("f[i] = sum(k, min(0, i), 2, x[k])", "a lower sum bound may use max\\(…\\) and ceil\\(n / d\\), not min"),
    ("f[i] = sum(k, 0, ceil(i / 2), x[k])", "an upper sum bound may use min\\(…\\) and floor\\(n / d\\), not ceil"),
])
def test_malformed_brackets_and_bounds_are_refused(source, message):
    with pytest.raises(SourceError, match=message):
        define(source, {"i": 3})


def test_derivative_errors_name_the_problem():
    f = define("f[i] = x[i] * df[i]", {"i": 3}, backend="python")
    with pytest.raises(SourceError, match="f does not read 'y' \\(it reads df, x\\)"):
        f.derivative("y")
    with pytest.raises(SourceError, match="reads an argument named df, the name of its cotangent"):
        f.derivative("x")
    g = define("g[i] = x[i]", {"i": 3}, backend="python").derivative("x")
    with pytest.raises(SourceError, match="no array given for the argument 'dg'"):
        g(x=np.ones(3))
    with pytest.raises(SourceError, match="the cotangent ddx must have shape \\(5,\\)"):
        g.vjp(np.ones(3), x=np.ones(5), dg=np.ones(3))


def test_numba_reduction_layout_for_few_long_sums():
    """A gradient with few elements, each a long sum (a convolution's kernel), runs as a chunked
    reduction (partial sums per chunk, added at the end): the same values as the element-parallel
    layout, also where the sum's range depends on the element and for several chunks."""
    from jacacc.elementwise import ElementwiseFunction
    from jacacc.kernels import numba_kernel, python_source

    f = define("f[i] = sum(k, 0, 2, w[k] * x[i + k])", {"i": 500}, backend="python")
    rng = np.random.default_rng(10)
    x, w, df = rng.standard_normal(502), rng.standard_normal(3), rng.standard_normal(500)
    dw = f.gather("w", (3,)).definition
    assert "for _c in prange(_chunks)" in python_source(dw, ["df", "x"], parallel=True, reduction=True)
    by_element, by_sum = np.empty(3), np.empty(3)
    numba_kernel(dw, ["df", "x"])(by_element, df, x)
    numba_kernel(dw, ["df", "x"], reduction=True)(by_sum, df, x)
    assert np.allclose(by_sum, by_element, rtol=1e-12) and np.allclose(by_sum, np.correlate(x, df, "valid"))
    g = define("g[i] = sum(k, 0, 9000 - 3*i, exp(x[k + i])) * x[i]", {"i": 4}, backend="python")
    X = rng.standard_normal(9003) / 10
    h = define("h[i] = sum(k, i, 9000 + 2*i, x[k] * y[k - i])", {"i": 3}, backend="python")
    Y = rng.standard_normal(9001)
    for fun, inputs, name in ((g, {"x": X, "dg": df[:4]}, "x"), (h, {"x": X, "y": Y, "dh": df[:3]}, "y")):
        for tape_name, tape in fun.tape().items():
            sizes = dict(zip(tape.indices, fun.tape_shape(tape_name, fun.shapes_of(inputs)), strict=True))
            inputs[tape_name] = ElementwiseFunction(tape, sizes, "python")(**inputs)
        d = fun.gather(name, inputs[name].shape).definition
        expected = np.empty(inputs[name].shape)
        got = np.empty(inputs[name].shape)
        args = [inputs[a] for a in sorted(d.arguments())]
        numba_kernel(d, sorted(d.arguments()))(expected, *args)
        numba_kernel(d, sorted(d.arguments()), reduction=True)(got, *args)
        assert np.allclose(got, expected, rtol=1e-12), name
    k = define("f[i] = sum(k, 0, 2, w[k] * x[i + k])", {"i": 500}).compile("numba")
    buffers = {"w": np.empty(3)}
    out = k.vjp_into(buffers, df, w=w, x=x)
    assert out["w"] is buffers["w"] and np.allclose(out["w"], by_element)
    with pytest.raises(ValueError, match="the buffer for dw must be a contiguous float64 array of shape \\(3,\\)"):
        k.vjp_into({"w": np.empty(4)}, df, w=w, x=x)


def test_compiled_kernels_run_serially_below_the_parallel_threshold():
    """Small inputs run on the calling thread, large ones in parallel (the chunked reduction only
    there); both give the same gradients."""
    from jacacc.elementwise import compiled

    pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    source = "f[i] = sum(k, 0, 2, w[k] * x[i + k])"
    for n, parallel in ((500, False), (compiled.PARALLEL_MIN_ELEMENTS + 10, True)):
        k = define(source, {"i": n}).compile("numba")
        x, w, df = rng.standard_normal(n + 2), rng.standard_normal(3), rng.standard_normal(n)
        got = k.vjp(df, w=w, x=x)
        assert np.allclose(got["w"], np.correlate(x, df, "valid"), rtol=1e-10)
        assert np.allclose(got["x"], np.convolve(df, w), rtol=1e-10)
        modes = {key[1:] for key in k._kernels}  # (reduction, parallel) of each kernel built
        assert {p for _, p in modes} == {parallel}
        assert (True, True) in modes if parallel else (True, False) not in modes


@pytest.mark.parametrize("source, sizes, stored", [
    ("f[i, j] = tanh(x[i + j]) * y[j]", {"i": 3, "j": 4}, ["f_p0[p0] = tanh(x[p0])"]),
    ("f[i, j] = exp(2 * x[i]) + y[j]", {"i": 3, "j": 4}, ["f_p0[p0] = exp(2 * x[p0])"]),  # j does not move x
    ("f[i] = sum(k, 0, 2, sin(x[k]) * cos(y[i + k]))", {"i": 4},
     ["f_p0[p0] = sin(x[p0])", "f_p1[p0] = cos(y[p0])"]),
    ("f[i] = tanh(x[i]) + exp(x[2*i])", {"i": 3}, []),  # injective: each element computed once anyway
    ("f[i, j] = log(x[i + j])", {"i": 2, "j": 2}, []),  # log is not defined on every unread element
    ("f[i, j] = tanh(x[i] * y[j])", {"i": 2, "j": 2}, []),  # two elements: no per-element value
])
def test_pointwise_values_of_costly_calls(source, sizes, stored):
    """A costly call of one argument element that f evaluates more often than the argument has
    elements is tabulated once per element (the tape) and read by the derivatives; the gradients
    are unchanged."""
    from jacacc.elementwise import derive

    f = define(source, sizes, backend="python")
    values = derive.pointwise_values(f.definition)
    assert [p.definition.source for p in values.values()] == stored
    rng = np.random.default_rng(5)
    arrays = {n: rng.uniform(0.5, 1.5, 2 * max(sizes.values()) + 3) for n in f.arguments}
    df = rng.standard_normal(f.shape)
    gradients = f.vjp(df, **arrays)
    gathered = " ".join(str(f.gather(name, arrays[name].shape)) for name in f.arguments)
    assert all(p.name in gathered for p in values.values()), gathered
    for name in f.arguments:
        assert np.allclose(gradients[name], f.derivative(name)(df=df, **arrays), rtol=1e-13, atol=0)


@pytest.mark.parametrize("source, sizes, shapes", [
    ("f[i] = sum(k, max(0, i - 2500), min(3, i), x[i - k] * w[k])", {"i": 3000}, {"x": (3000,), "w": (4,)}),
    ("f[i] = sum(k, max(0, 6 - i), min(9, 2400 - i), x[k + i])", {"i": 2500}, {"x": (2600,)}),
    ("f[i, j] = sum(k, max(0, j - 4, i - 3), min(2, j, 2*i), x[i, j - k])", {"i": 7, "j": 9}, {"x": (7, 9)}),
    ("f[i, j] = sum(k, max(ceil(i / 2), j - 3), min(5, j + 1), sum(m, max(0, 2 - j), 1, x[k + m]))",
     {"i": 6, "j": 8}, {"x": (7,)}),
    ("f[i, j] = sum(k, max(0, 2*j - 9), min(4, j), x[k] * y[i, j])", {"i": 3, "j": 6}, {"x": (5,), "y": (3, 6)}),
    # a 2-D convolution's dx: in the interior the sums' loops go outside the last index's loop
    ("f[i, j] = y[i, j] * sum(p, max(0, i - 20), min(2, i), sum(q, max(0, j - 20), min(2, j), "
     "w[p, q] * x[i - p, j - q]))", {"i": 23, "j": 23}, {"w": (3, 3), "x": (21, 21), "y": (23, 23)}),
])
def test_interior_split_kernels_equal_the_unsplit_loops(source, sizes, shapes, monkeypatch):
    """Cutting the last index into border, interior (fixed sum ranges), border changes no value,
    serially or in parallel blocks."""
    from jacacc.kernels import loops as kernels

    f = define(source, sizes, backend="python")
    split_at = kernels.interior_split(f.definition)
    assert split_at is not None
    rng = np.random.default_rng(2)
    arrays = {n: rng.standard_normal(s) for n, s in shapes.items()}
    f.check(f.shapes_of(arrays))
    outer = {n: sizes[n] // 2 for n in f.definition.indices[:-1]}  # the interior is not empty
    low = max(lim.value(outer, True) for lim in split_at.lower) if split_at.lower else 0
    high = min(lim.value(outer, False) for lim in split_at.upper) if split_at.upper else sizes[f.definition.indices[-1]]
    assert max(low, 0) <= min(high, sizes[f.definition.indices[-1]] - 1)
    args = [arrays[a] for a in f.arguments]
    split, parallel = np.empty(f.shape), np.empty(f.shape)
    kernels.python_kernel(f.definition, f.arguments)(split, *args)
    kernels.numba_kernel(f.definition, f.arguments)(parallel, *args)
    monkeypatch.setattr(kernels, "interior_split", lambda definition: None)
    whole = np.empty(f.shape)
    kernels.python_kernel(f.definition, f.arguments)(whole, *args)
    assert np.allclose(split, whole, rtol=1e-13, atol=1e-14) and np.allclose(parallel, whole, rtol=1e-12, atol=1e-13)


def test_sums_and_calls_that_skip_the_last_index_are_computed_once_per_outer_element():
    """Loop-invariant code motion over the output loops: tanh(Σ_k A[i, k]·x[k]) is computed once per
    i, not once per (i, j); the values are those of the reference evaluation."""
    from jacacc.kernels import loops as kernels

    f = define("f[i, j] = tanh(sum(k, 0, 3, A[i, k] * x[k])) * y[j] + sum(k, 0, 1, x[k]) * y[j]",
               {"i": 5, "j": 6}, backend="python")
    assert set(kernels._invariants(f.definition).values()) == {0, -1}  # tanh(…) per i, Σ x once
    source = kernels.python_source(f.definition, f.arguments)
    assert source.index("_h") < source.index("for _i_j in range")
    rng = np.random.default_rng(4)
    A, x, y = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(6)
    expected = np.tanh(A @ x)[:, None] * y[None, :] + (x[0] + x[1]) * y[None, :]
    assert np.allclose(f(A=A, x=x, y=y), expected, rtol=1e-13)
    assert np.allclose(define(f.definition.source, {"i": 5, "j": 6})(A=A, x=x, y=y), expected, rtol=1e-13)


@pytest.mark.parametrize("source, sizes, shapes, layout", [
    # db of §6: the sum over i goes outside the last index (rows of a and b, df·f·c once per i)
    ("f[p, q] = -2 * sum(i, 0, 6, g[i, p] * c[i, i] * (a[i, q] + b[p, q]))", {"p": 5, "q": 4},
     {"g": (7, 5), "c": (7, 7), "a": (7, 4), "b": (5, 4)}, "for _k in range"),
    # nested sums commute so that the innermost runs along rows: sum(z, …, sum(j, …)) in the loops
    ("f[t] = x[t] * sum(j, 0, 8, sum(z, max(0, t - 5), min(3, t), g[t - z, j]))", {"t": 9},
     {"x": (9,), "g": (6, 9)}, "* _k2)), np.uint64((_k6))]"),  # the inner loop (_k6) moves g's last axis
])
def test_loop_orders_for_contiguous_reads_keep_the_values(source, sizes, shapes, layout, monkeypatch):
    from jacacc.kernels import emit
    from jacacc.kernels import loops as kernels

    f = define(source, sizes, backend="python")
    rng = np.random.default_rng(6)
    arrays = {n: rng.standard_normal(s) for n, s in shapes.items()}
    f.check(f.shapes_of(arrays))
    args = [arrays[a] for a in f.arguments]
    assert layout in kernels.python_source(f.definition, f.arguments, parallel=True)
    got, compiled = np.empty(f.shape), np.empty(f.shape)
    kernels.python_kernel(f.definition, f.arguments)(got, *args)
    kernels.numba_kernel(f.definition, f.arguments)(compiled, *args)
    monkeypatch.setattr(kernels, "_sum_outside_last_index", lambda definition: False)
    monkeypatch.setattr(kernels, "interior_split", lambda definition: None)
    monkeypatch.setattr(emit, "innermost_contiguous", lambda node: node)
    plain = np.empty(f.shape)
    kernels.python_kernel(f.definition, f.arguments)(plain, *args)
    assert np.allclose(got, plain, rtol=1e-13, atol=1e-14) and np.allclose(compiled, plain, rtol=1e-12, atol=1e-13)


def test_derivatives_of_derivatives_with_and_without_the_shape():
    """dx = Σ_z df[dx0 − z, z] · y[0] is a function over x's shape; its derivative w.r.t. y sums
    over dx0: bounded by the z-sum's range where y[0] stays inside it (no shape), by the shape where
    y[0] moves out (the sum is then never empty), and taken from the arrays by vjp."""
    f = define("f[i, s] = x[i + s] * y[0]", {"i": 2, "s": 2}, backend="python")
    symbolic = f.derivative("x")
    assert "* y[0])" in str(symbolic)  # inside the sum: for dx0 ≥ 3 it is empty
    g = f.derivative("x", shape=(3,))
    assert str(g).startswith("dx[dx0] = y[0] * sum(")
    assert g.shape == (3,)
    rng = np.random.default_rng(9)
    x, y, df, dg = rng.standard_normal(3), rng.standard_normal(1), rng.standard_normal((2, 2)), rng.standard_normal(3)
    # Σ_dx0 dg[dx0] · Σ_{i + s = dx0} df[i, s], by hand
    expected = sum(dg[i + s] * df[i, s] for i in range(2) for s in range(2))
    for h in (g, symbolic):
        assert np.allclose(h.derivative("y")(ddx=dg, df=df, x=x, y=y), [expected], rtol=1e-13)
    assert np.allclose(f.derivative("x").vjp(dg, df=df, x=x, y=y)["y"], [expected], rtol=1e-13)
    with pytest.raises(SourceError, match="was derived for x of shape \\(3,\\), got an array of shape \\(4,\\)"):
        g(df=df, x=np.zeros(4), y=y)


@pytest.mark.parametrize("source, sizes, shapes", [
    # an arrowhead: the diagonal, the last column, the last row
    ("f[i, j] = [i == j] * x[j] + [j == 5] * y[i] + [i == 5] * x[j] * y[i]", {"i": 6, "j": 6}, {"x": (6,), "y": (6,)}),
    # a band, one diagonal subtracted, a constant diagonal, a product over a sum of bracketed terms
    ("f[i, j] = ([i == j + 1] * x[j] - [i + 2 == j] * y[i] + [i == j] * 2) * exp(x[i])", {"i": 7, "j": 7},
     {"x": (7,), "y": (7,)}),
    # a pinned index beside a free one (three axes), and rows picked by an equality with a range on the last
    ("f[i, j, k] = [k == i] * x[j] + [i == 1 and k >= j] * y[k]", {"i": 3, "j": 4, "k": 5}, {"x": (4,), "y": (5,)}),
])
def test_thin_terms_are_added_where_they_live(source, sizes, shapes, monkeypatch):
    """A body whose every term lives on a thin part of the output (a pin of the last index, or rows an
    equality picks) is written as zeros plus each term where it lives (jacacc.kernels.terms): the
    values are those of the element-by-element loops, interpreted and compiled in parallel."""
    from jacacc.kernels import loops as kernels
    from jacacc.kernels import terms as layout

    f = define(source, sizes, backend="python")
    assert "+= " in kernels.python_source(f.definition, f.arguments) or "-= " in kernels.python_source(
        f.definition, f.arguments)
    rng = np.random.default_rng(6)
    arrays = {n: rng.standard_normal(s) for n, s in shapes.items()}
    args = [arrays[a] for a in f.arguments]
    terms, parallel = np.full(f.shape, np.nan), np.full(f.shape, np.nan)
    kernels.python_kernel(f.definition, f.arguments)(terms, *args)
    kernels.numba_kernel(f.definition, f.arguments)(parallel, *args)
    monkeypatch.setattr(layout, "terms_source", lambda *a, **k: None)  # the layout loops.python_source asks first
    whole = np.empty(f.shape)
    kernels.python_kernel(f.definition, f.arguments)(whole, *args)
    np.testing.assert_allclose(terms, whole, rtol=1e-15, atol=0)
    np.testing.assert_allclose(parallel, whole, rtol=1e-15, atol=0)


def test_a_dense_term_keeps_the_element_by_element_loops():
    """A term that lives on every entry of a row (no pin, no row picked) is cheaper in the one pass
    that tests the brackets: no terms layout."""
    from jacacc.kernels.terms import terms_source

    f = define("f[i, j] = [i == j] * x[j] + y[i] * x[j]", {"i": 4, "j": 4}, backend="python")
    assert terms_source(f.definition, f.arguments) is None
