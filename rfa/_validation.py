"""Input checks shared by every public function.

Each check raises :class:`InputTypeError` (wrong kind of value; a ``TypeError``) or :class:`InputError` (wrong
shape or value; a ``ValueError``) naming the argument, what was received and what was expected, so that bad input
never reaches XLA and surfaces as an opaque compiler error.
"""

from __future__ import annotations

import functools
import importlib
import numbers
import warnings
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np


class InputError(ValueError):
    """Bad input to an rfa attention, estimator or layer: the one type to catch, eagerly and (through
    :func:`rfa.checks.checked`) under ``jit``. A ``ValueError``, so ``except ValueError`` still catches it."""


class InputTypeError(InputError, TypeError):
    """An :class:`InputError` about the kind of a value (not an array, a wrong dtype); also a ``TypeError``."""


InputError.__module__ = InputTypeError.__module__ = "rfa"  # where users name them: rfa.InputError


def renamed_keywords(**renames: str) -> Callable:
    """Keeps the keywords renamed in rfa 0.3 working for one release (docs/changelog.md): with
    ``renamed_keywords(kind="projection_kind")``, ``f(kind=x)`` is ``f(projection_kind=x)`` and warns. rfa applies
    it after the ``def`` (``f = renamed_keywords(...)(f)``), not as a decorator: mutmut (``make mutation``) leaves
    decorated functions unmutated.

    Example:
      >>> def f(*, projection_kind="iid"):
      ...     return projection_kind
      >>> f = renamed_keywords(kind="projection_kind")(f)
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     f(kind="simplex"), str(caught[0].message)
      ('simplex', 'f(kind=...) is f(projection_kind=...) since rfa 0.3; kind= goes in 0.4.')
    """

    def rename(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def renamed(*args, **kwargs):
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise InputTypeError(f"{fn.__qualname__}() got {old}= and {new}=; {old}= is {new}='s old name.")
                warnings.warn(
                    f"{fn.__qualname__}({old}=...) is {fn.__qualname__}({new}=...) since rfa 0.3; {old}= goes in 0.4.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return renamed

    return rename


def moved_names(package: str, moves: dict[str, str]) -> Callable[[str], object]:
    """A package's ``__getattr__`` (PEP 562) that keeps names moved in rfa 0.3 to a module of a package above it (the
    Flax parts of ``rfa.attention``, now in ``rfa.layers``) answering under their old place for one release, with a
    warning. ``moves`` is ``{name: the module that defines it now}``; the module is imported on first use, so the
    package itself imports nothing above it.

    Example:
      >>> getattr_ = moved_names("rfa.attention", {"calibrating": "rfa.layers.feature_variables"})
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     found = getattr_("calibrating")
      >>> found is rfa.layers.feature_variables.calibrating, str(caught[0].message).split(" since")[0]
      (True, 'rfa.attention.calibrating is rfa.layers.feature_variables.calibrating')
    """

    def moved(name: str):
        if name not in moves:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} is {moves[name]}.{name} since rfa 0.3; the old name goes in 0.4.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moves[name]), name)

    moved.moves = dict(moves)  # read by the structure test
    return moved


def renamed_function(fn: Callable, old: str) -> Callable:
    """``fn`` under its name before rfa 0.3, kept for one release (docs/changelog.md): calls it and warns.

    Example:
      >>> def estimator(name):
      ...     return name
      >>> feature_map = renamed_function(estimator, "feature_map")
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     feature_map("positive"), str(caught[0].message)
      ('positive', 'rfa.feature_map is rfa.estimator since rfa 0.3; feature_map goes in 0.4.')
    """

    @functools.wraps(fn)
    def renamed(*args, **kwargs):
        warnings.warn(
            f"rfa.{old} is rfa.{fn.__name__} since rfa 0.3; {old} goes in 0.4.", DeprecationWarning, stacklevel=2
        )
        return fn(*args, **kwargs)

    renamed.__name__ = renamed.__qualname__ = old
    return renamed


def check_floating(x, name: str) -> jax.Array:
    """Returns ``x`` as an array after checking it has a floating dtype."""
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise InputTypeError(f"{name} must be a JAX or NumPy array, got {type(x).__name__}.")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise InputTypeError(f"{name} must have a floating dtype (float32, bfloat16, ...), got {x.dtype}.")
    return jnp.asarray(x)


def check_rank(x, name: str, *, ndim: int | None = None, min_ndim: int | None = None, layout: str = ""):
    """Checks the number of dimensions of ``x``; ``layout`` describes the expected axes."""
    suffix = f" {layout}" if layout else ""
    if ndim is not None and x.ndim != ndim:
        raise InputError(f"{name} must have rank {ndim}{suffix}, got shape {tuple(x.shape)}.")
    if min_ndim is not None and x.ndim < min_ndim:
        raise InputError(f"{name} must have rank >= {min_ndim}{suffix}, got shape {tuple(x.shape)}.")


def check_positive_int(n, name: str) -> int:
    """Returns ``n`` as an int after checking it is an integer >= 1."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise InputTypeError(f"{name} must be an int >= 1, got {n!r} of type {type(n).__name__}.")
    if n < 1:
        raise InputError(f"{name} must be >= 1, got {n}.")
    return int(n)


def check_choice(value, name: str, choices: Sequence[str]) -> str:
    """Checks that ``value`` is one of ``choices``."""
    if value not in choices:
        raise InputError(f"{name} must be one of {sorted(choices)}, got {value!r}.")
    return value


def check_same_last_dim(a, b, name_a: str, name_b: str, what: str = "feature dimension"):
    """Checks that two arrays agree on their last axis."""
    if a.shape[-1] != b.shape[-1]:
        raise InputError(
            f"{name_a} and {name_b} must have the same {what} (last axis), got "
            f"{name_a}.shape={tuple(a.shape)} and {name_b}.shape={tuple(b.shape)}."
        )


def check_broadcastable(shape_a, shape_b, name_a: str, name_b: str):
    """Checks that two shapes broadcast together (NumPy rules)."""
    try:
        np.broadcast_shapes(tuple(shape_a), tuple(shape_b))
    except ValueError:
        raise InputError(
            f"{name_a} with shape {tuple(shape_a)} and {name_b} with shape {tuple(shape_b)} do not broadcast together."
        ) from None


def check_broadcastable_to(shape, target, name: str, layout: str = ""):
    """Checks that ``shape`` broadcasts to ``target`` (every axis 1 or equal, aligned from the right)."""
    ok = len(shape) <= len(target) and all(s in (1, t) for s, t in zip(shape[::-1], target[::-1], strict=False))
    if not ok:
        suffix = f" {layout}" if layout else ""
        raise InputError(f"{name} must be broadcastable to{suffix} {tuple(target)}, got shape {tuple(shape)}.")


def is_concrete(x) -> bool:
    """True when ``x`` holds a value now (not a tracer inside ``jit``/``grad``)."""
    return not isinstance(x, jax.core.Tracer)


def check_key(key, name: str = "key"):
    """Checks that ``key`` is a PRNG key (a typed key or a raw uint32[2] key)."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and key.shape == ():
        return key
    if dtype == jnp.uint32 and tuple(key.shape) == (2,):
        return key
    raise InputTypeError(
        f"{name} must be a single PRNG key from jax.random.key(seed) (or jax.random.PRNGKey), got "
        f"{type(key).__name__} with dtype {dtype} and shape {getattr(key, 'shape', None)}."
    )
