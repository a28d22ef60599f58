"""What a traced function read besides its arguments, and whether it has changed.

A cached transformation (:func:`jacacc.tensor.grad`, ``hessian``, …) traces
``f`` once per argument shapes and reuses the planned derivative.  Every value
``f`` reads that is not an argument — a closure variable, a global array, an
attribute of ``self``, a default argument — enters that plan as a constant.
``jax.grad`` users expect a fresh result when such a value changes, so before a
cached plan is reused, :class:`Captured` checks that everything ``f``'s code can
reach is what it was when ``f`` was traced; if not, ``f`` is traced again.

What is reachable (collected once, when ``f`` is traced):

* a Python function's closure cells, default arguments and the globals its
  code (and the code of the functions, lambdas and comprehensions inside it)
  names;
* from there, recursively: the functions, bound methods and
  ``functools.partial`` objects found (their own closures and globals), the
  items of tuples, lists, dicts and sets, the attributes of modules, classes
  and library objects that the code names, and every attribute of an instance
  of a class defined outside installed libraries (``self.W``, a config object).

What is checked at each call: each binding still holds the same object (a
rebound name, a replaced attribute, a list item or dict entry changed, added
or removed), equal numbers and strings counting as the same, and each
reachable NumPy array still holds the same numbers (one comparison with a copy:
a pass over its memory — pass large data as an argument to avoid it).
Functions, arrays and objects inside installed libraries (NumPy, SciPy,
jacacc, the standard library) are taken as fixed and not entered.

What cannot be checked is refused: a function that draws random numbers while
traced (NumPy's global generator, Python's ``random``, or a generator object
it can reach) would need a fresh run at every call, so
:func:`refuse_impure_trace` names it.  A function that changes a value it can
reach itself (a side effect: counting its calls, logging to a list) runs once
per trace, as under ``jax.jit``; a :class:`SideEffectWarning` says so, and the
snapshot is taken after the trace.

Examples
--------
>>> import numpy as np
>>> c = 2.0
>>> captured = Captured.of(lambda x: c * x)
>>> captured.changed() is None
True
>>> c = 5.0
>>> captured.changed()
"the global 'c' was rebound"
"""

from __future__ import annotations

import array
import collections
import contextlib
import dis
import functools
import os
import random
import sys
import sysconfig
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from jacacc.errors import TraceError

__all__ = ["Captured", "SideEffectWarning", "refuse_impure_trace"]


class SideEffectWarning(UserWarning):
    """A cached transformation's function changed a value it can reach while it
    was traced (appending to a list, counting calls): that runs once per trace."""

#: Bindings collected at most; a function that reaches more is traced at every call.
MAX_BINDINGS = 100_000
_MISSING = object()
_IMMUTABLE_SCALARS = (int, float, complex, str, bytes, bool, type(None), np.generic)
#: builtins through which code reads globals by names computed at run time
_DYNAMIC_LOOKUPS = frozenset({"globals", "eval", "exec", "vars"})


# ---------------------------------------------------------------------------- what belongs to a library
@functools.cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


@functools.cache
def _is_library_module(name: str | None) -> bool:
    """True for a module of an installed library, the standard library or jacacc."""
    if not name:
        return False
    top = name.partition(".")[0]
    if top in sys.builtin_module_names or top in {"builtins", "jacacc"}:
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    if path is None:
        return top in sys.stdlib_module_names
    return os.path.realpath(path).startswith(_library_roots())


def _is_library(obj: Any) -> bool:
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return _is_library_module(module if isinstance(module, str) else None)


def _code_names(code: types.CodeType) -> frozenset[str]:
    """Global and attribute names read by ``code`` and the code objects nested in it."""
    names: set[str] = set()
    for c in _codes(code):
        names.update(c.co_names)
    return frozenset(names)


def _global_names(code: types.CodeType) -> frozenset[str]:
    """The names ``code`` and the code objects nested in it load as globals — not the attribute
    names among ``co_names``: ``V.T`` reads no global ``T``, and a global array ``T`` would be
    compared at every call for nothing."""
    return frozenset(instruction.argval for c in _codes(code) for instruction in dis.get_instructions(c)
                     if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"))


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code objects nested in it (functions, lambdas, comprehensions)."""
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


# ---------------------------------------------------------------------------- the snapshot
def _same(now: Any, then: Any) -> bool:
    if now is then:
        return True
    # an equal number or string re-created (``c = 2.0`` assigned again) is the same value
    if type(now) is not type(then):
        return False
    if isinstance(then, _IMMUTABLE_SCALARS):
        if isinstance(then, float | np.floating) and then == 0:  # 0.0 and -0.0: 1/x differs
            return bool(now == then) and bool(np.signbit(now) == np.signbit(then))
        return bool(now == then) or (now != now and then != then)  # NaN is NaN here
    if isinstance(then, tuple | frozenset):  # a dict's keys, a set's members
        try:
            return bool(now == then)
        except (TypeError, ValueError):  # items without a truth-valued ==
            return False
    return False


#: numeric arrays up to this many bytes are compared byte for byte (two short copies and a memcmp,
#: a fraction of a microsecond against the several of NumPy's comparisons, run at every cached call)
BYTES_COMPARED = 1 << 16


def _same_array(now: np.ndarray, then: np.ndarray) -> bool:
    if now.shape != then.shape or now.dtype != then.dtype:
        return False
    if now.dtype.kind in "fciub" and now.nbytes <= BYTES_COMPARED:
        # equal bytes are equal values with the same signs of zero; a NaN whose payload changed
        # differs too (a new plan, where none was needed: never a stale one)
        return now.tobytes() == then.tobytes()
    if now.dtype.kind == "f":  # the sign of a zero counts (1/x, copysign, arctan2 read it)
        return bool(np.array_equal(now, then, equal_nan=True)) and bool(np.array_equal(np.signbit(now),
                                                                                       np.signbit(then)))
    if now.dtype.kind == "c":
        return _same_array(now.real, then.real) and _same_array(now.imag, then.imag)
    return bool(np.array_equal(now, then))


def _array_of(value: Any, where: str) -> np.ndarray:
    """A library object's values as a NumPy array (a torch tensor, a pandas frame: ``__array__``)."""
    try:
        return np.asarray(value)
    except Exception as error:  # noqa: BLE001 - any failure means the values cannot be read
        raise TraceError(f"{where} is a {type(value).__module__}.{type(value).__name__} whose values cannot be read "
                         f"as an array ({error}), so a cached plan could not tell when it changes; pass it as an "
                         "argument") from None


class Captured:
    """The values a function can reach besides its arguments, as they were.

    Build with :meth:`of`; :meth:`changed` says what changed since (``None``
    when nothing did).  See the module notes for what is reached and checked.
    """

    __slots__ = ("bindings", "arrays", "generators", "complete", "_reached", "_places")

    def __init__(self) -> None:
        # (description, read-now, the object then)
        self.bindings: list[tuple[str, Callable[[], Any], Any]] = []
        # (description, the array itself or a function reading it now, a copy of it then)
        self.arrays: list[tuple[str, np.ndarray | Callable[[], np.ndarray], np.ndarray]] = []
        self.generators: list[tuple[str, Any]] = []
        self.complete = True
        self._reached: set[int] = set()
        self._places: set[tuple] = set()

    @classmethod
    def of(cls, f: Callable) -> Captured:
        """Snapshot everything ``f`` can reach (see the module notes).

        >>> import numpy as np
        >>> w = np.ones(3)
        >>> captured = Captured.of(lambda x: w @ x)
        >>> w[0] = 2.0
        >>> captured.changed()
        "the array in the global 'w' was changed in place"
        """
        captured = cls()
        captured._walk(f)
        del captured._reached, captured._places
        return captured

    def changed(self, ignoring: frozenset[str] = frozenset()) -> str | None:
        """What changed since the snapshot (the first change found), or ``None``; the bindings
        described in ``ignoring`` are not checked (a cached plan reads them at each call)."""
        if not self.complete:
            return f"more than {MAX_BINDINGS} values are reachable and not checked"
        for what, read, then in self.bindings:
            now = read()
            if now is not then and not _same(now, then) and what not in ignoring:  # identity first: per call
                return what
        for what, source, then in self.arrays:
            if not _same_array(source if isinstance(source, np.ndarray) else source(), then):
                return what
        return None

    def scalar_binding(self, what: str) -> tuple[Callable[[], Any], Callable[[Any], None]] | None:
        """The binding described by ``what`` as ``(read, write)`` where it held a real number (a
        closure variable, a global, an attribute or a list or dict entry) that is a real number
        now too, else None: the bindings a cached plan can take as a parameter instead of a constant."""
        found = next(((read, then) for w, read, then in self.bindings if w == what), None)
        if found is None:
            return None
        read, then = found
        write = _writer(read)
        if write is None or not (_is_real_scalar(then) and _is_real_scalar(read())):
            return None
        return read, write

    # ------------------------------------------------------------------ collecting
    def _bind(self, what: str, read: Callable[[], Any], value: Any) -> bool:
        # one check per place: two functions of one module read the same globals
        func = getattr(read, "func", read)
        owner = getattr(func, "__self__", None)
        place = (id(func) if owner is None else (id(owner), func.__name__),
                 *(a if isinstance(a, str | int) else id(a) for a in getattr(read, "args", ())))
        if place in self._places:
            return True
        self._places.add(place)
        if len(self.bindings) >= MAX_BINDINGS:
            self.complete = False
            return False
        self.bindings.append((what, read, value))
        return True

    def _walk(self, root: Any) -> None:
        # an explicit stack: reachable object graphs can be deep.  The root is
        # entered even where it is a library's function (a jacacc problem's).
        stack: list[tuple[Any, str, frozenset[str]]] = []
        if isinstance(root, types.FunctionType):
            self._reached.add(id(root))
            stack.extend(self._function(root, "the function"))
        else:
            stack.append((root, getattr(root, "__name__", "the function"), frozenset()))
        while stack and self.complete:
            value, where, names = stack.pop()
            if id(value) in self._reached or isinstance(value, _IMMUTABLE_SCALARS):
                continue
            self._reached.add(id(value))
            stack.extend(self._children(value, where, names))

    def _children(self, value: Any, where: str, names: frozenset[str]) -> Iterator[tuple[Any, str, frozenset[str]]]:
        """What ``value`` (reached at ``where``, by code naming ``names``) leads to; its checks recorded."""
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "O":
                yield from ((item, f"{where}[{k}]", names) for k, item in enumerate(value.flat))
            else:
                self.arrays.append((f"the array in {where} was changed in place", value, value.copy()))
        elif isinstance(value, np.random.Generator | np.random.RandomState | np.random.BitGenerator | random.Random):
            self.generators.append((where, value))
        elif isinstance(value, types.FunctionType):
            if not _is_library(value):
                yield from self._function(value, where)
        elif isinstance(value, types.MethodType):
            func = value.__func__
            yield func, where, names
            more = _code_names(func.__code__) if isinstance(func, types.FunctionType) else frozenset()
            yield value.__self__, f"{where}.__self__", names | more
        elif isinstance(value, functools.partial):
            yield from ((part, f"{where}.{attribute}", names) for attribute, part in
                        (("func", value.func), ("args", value.args), ("keywords", value.keywords)))
        elif isinstance(value, tuple | frozenset):
            yield from ((item, f"{where}[{k}]", names) for k, item in enumerate(value))
        elif isinstance(value, list | collections.deque):
            self._bind(f"{where} changed length", functools.partial(len, value), len(value))
            for k, item in enumerate(value):
                self._bind(f"{where}[{k}] was replaced", functools.partial(_item, value, k), item)
                yield item, f"{where}[{k}]", names
        elif isinstance(value, dict):
            yield from self._entries(value, where, names)
        elif isinstance(value, set):
            self._bind(f"{where} changed", functools.partial(frozenset, value), frozenset(value))
        elif isinstance(value, bytearray | array.array | memoryview):  # NumPy reads their buffers
            self._bind(f"{where} changed", functools.partial(_buffer_bytes, value), _buffer_bytes(value))
        elif hasattr(type(value), "__array__") and _is_library(type(value)):  # a torch tensor, a pandas frame
            read = functools.partial(_array_of, value, where)
            self.arrays.append((f"the values of {where} changed", read, read().copy()))
        elif isinstance(value, types.ModuleType | type):
            if not _is_library(value):
                yield from self._attributes(value.__dict__, where, names)
        else:
            yield from self._instance(value, where, names)

    def _function(self, f: types.FunctionType, where: str) -> Iterator[tuple[Any, str, frozenset[str]]]:
        names = _code_names(f.__code__)
        for attribute in ("__defaults__", "__kwdefaults__"):
            defaults = getattr(f, attribute)
            if defaults is not None:
                self._bind(f"the default arguments of {where} changed", functools.partial(getattr, f, attribute),
                           defaults)
                yield defaults, f"the default arguments of {where}", names
        for variable, cell in zip(f.__code__.co_freevars, f.__closure__ or (), strict=True):
            content = _cell(cell)
            self._bind(f"the closure variable {variable!r} was rebound", functools.partial(_cell, cell), content)
            if content is not _MISSING:
                yield content, f"the closure variable {variable!r}", names
        # a name absent from the globals is a builtin: not a global read; code that calls globals(),
        # eval, exec or vars can read any global by a name computed at run time: all are checked
        read = _global_names(f.__code__)
        if read & _DYNAMIC_LOOKUPS:
            read = read | {name for name in f.__globals__ if not name.startswith("__")}
        for name in sorted(read & f.__globals__.keys()):
            value = f.__globals__[name]
            self._bind(f"the global {name!r} was rebound", functools.partial(f.__globals__.get, name, _MISSING),
                       value)
            yield value, f"the global {name!r}", names

    def _attributes(self, namespace: Any, where: str, names: frozenset[str]
                    ) -> Iterator[tuple[Any, str, frozenset[str]]]:
        """The entries of a module's, class's or object's namespace that the code names."""
        for name in sorted(names):
            value = namespace.get(name, _MISSING)
            if value is not _MISSING:
                self._bind(f"{where}.{name} was rebound", functools.partial(namespace.get, name, _MISSING), value)
                yield value, f"{where}.{name}", names

    def _entries(self, mapping: dict, where: str, names: frozenset[str]) -> Iterator[tuple[Any, str, frozenset[str]]]:
        self._bind(f"{where} changed its keys", functools.partial(_keys, mapping), tuple(mapping))
        for key, item in mapping.items():
            self._bind(f"{where}[{key!r}] was replaced", functools.partial(mapping.get, key, _MISSING), item)
            yield item, f"{where}[{key!r}]", names

    def _instance(self, value: Any, where: str, names: frozenset[str]) -> Iterator[tuple[Any, str, frozenset[str]]]:
        """An object: its state (all of it for a user's class, the named attributes
        for a library's), its ``__call__`` and its classes."""
        cls = type(value)
        call = next((k.__dict__["__call__"] for k in cls.__mro__ if "__call__" in k.__dict__), None)
        if isinstance(call, types.FunctionType) and not _is_library(call):
            names = names | _code_names(call.__code__)
            yield call, f"{where}.__call__", names
        state = getattr(value, "__dict__", None)
        library = _is_library(cls)
        if isinstance(state, dict):
            if library:
                # the attributes the code names, and every array the object holds: a library's
                # methods read their own (scipy.sparse's data, indices and indptr in ``S @ x``)
                arrays = frozenset(k for k, v in state.items() if isinstance(v, np.ndarray))
                yield from self._attributes(state, where, names | arrays)
            else:
                yield from self._entries(state, f"{where}.__dict__", names)
        for klass in cls.__mro__:
            if _is_library(klass):
                continue
            yield klass, f"the class {klass.__name__}", names
            for slot in klass.__dict__.get("__slots__", ()):
                if slot not in ("__dict__", "__weakref__"):
                    read = functools.partial(getattr, value, slot, _MISSING)
                    self._bind(f"{where}.{slot} was rebound", read, read())
                    yield read(), f"{where}.{slot}", names


def _is_real_scalar(value: Any) -> bool:
    """A float (Python's or NumPy's): not an int or a bool, which shapes, indices and branches read."""
    return isinstance(value, float | np.floating)


def _writer(read: Callable[[], Any]) -> Callable[[Any], None] | None:
    """The function that rebinds what ``read`` (one of :class:`Captured`'s readers) reads, or None."""
    if not isinstance(read, functools.partial):
        return None
    func, args = read.func, read.args
    if func is _cell:
        return functools.partial(setattr, args[0], "cell_contents")
    if func is _item:
        return functools.partial(_set_item, args[0], args[1])
    owner = getattr(func, "__self__", None)
    if isinstance(owner, dict) and getattr(func, "__name__", "") == "get":  # globals, __dict__, dict entries
        return functools.partial(_set_item, owner, args[0])
    return None


def _set_item(container: Any, key: Any, value: Any) -> None:
    container[key] = value


def _item(sequence: list | collections.deque, k: int) -> Any:
    return sequence[k] if k < len(sequence) else _MISSING


def _buffer_bytes(buffer: bytearray | array.array | memoryview) -> tuple[str, bytes]:
    typecode = getattr(buffer, "typecode", None) or getattr(buffer, "format", "B")
    return typecode, bytes(buffer)


def _keys(mapping: dict) -> tuple:
    return tuple(mapping)


def _cell(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: the name is bound later
        return _MISSING


# ---------------------------------------------------------------------------- impure functions
def _generator_state(g: Any) -> Any:
    if isinstance(g, np.random.Generator):
        return g.bit_generator.state
    if isinstance(g, np.random.BitGenerator):
        return g.state
    if isinstance(g, np.random.RandomState):
        return _legacy_state(g)
    return g.getstate()


def _legacy_state(g: np.random.RandomState) -> tuple:
    return _comparable(g.get_state(legacy=True))


def _global_numpy_state() -> tuple:
    return _comparable(np.random.get_state(legacy=True))


def _comparable(state: tuple) -> tuple:
    kind, keys, pos, has_gauss, gauss = state
    return kind, keys.tobytes(), pos, has_gauss, gauss


@contextlib.contextmanager
def _unseeded_generators_counted() -> Iterator[list[int]]:
    """Count, in a list, the NumPy generators this thread seeds from OS entropy meanwhile: every
    unseeded one (``default_rng()``, ``PCG64()``, ``RandomState()``) draws its seed through
    ``numpy.random.bit_generator.randbits``."""
    import threading

    from numpy.random import bit_generator

    original = getattr(bit_generator, "randbits", None)
    calls: list[int] = []
    if original is None:  # another NumPy: nothing to count
        yield calls
        return
    thread = threading.get_ident()

    def counted(bits: int) -> int:
        if threading.get_ident() == thread:
            calls.append(bits)
        return original(bits)

    bit_generator.randbits = counted
    try:
        yield calls
    finally:
        bit_generator.randbits = original


@contextlib.contextmanager
def refuse_impure_trace(captured: Captured, name: str, transformation: str) -> Iterator[None]:
    """Trace inside this context: a function that draws random numbers while
    traced is refused with a :class:`~jacacc.errors.TraceError`; one that
    changes a value it can reach gets a :class:`SideEffectWarning`.

    A random function gives a different result at every call; a cached
    derivative would repeat the first call's draws (``jax.jit`` bakes them in
    silently).  Draw the numbers outside and pass them as an argument.
    """
    global_state = _global_numpy_state()
    python_state = random.getstate()
    generators = [(where, g, _generator_state(g)) for where, g in captured.generators]
    with _unseeded_generators_counted() as unseeded:
        yield
    drawn = []
    if unseeded:
        drawn.append("a generator it seeds from the operating system's entropy (np.random.default_rng() or "
                     "a bit generator without a seed)")
    if _global_numpy_state() != global_state:
        drawn.append("NumPy's global generator (np.random)")
    if random.getstate() != python_state:
        drawn.append("Python's random module")
    drawn += [f"the generator in {where}" for where, g, state in generators if _generator_state(g) != state]
    if drawn:
        raise TraceError(f"{name} draws random numbers from {' and '.join(drawn)} while traced: a cached "
                         f"{transformation} would repeat the first call's draws at every call; draw them outside "
                         "and pass them as an argument")
    change = captured.changed()
    if change is not None and captured.complete:
        warnings.warn(SideEffectWarning(
            f"{name} changed a value it can reach while traced ({change}): its side effects run once per trace, "
            f"not at every call of the cached {transformation}"), stacklevel=7)
