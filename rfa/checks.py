"""Errors at run time under ``jit``: the checks that need values, a switch to turn them off, and an opt-in check
for NaN.

Inside ``jit`` (and ``grad``, ``vmap``, ``scan``) arrays are tracers: a check of their values cannot raise while
tracing. :func:`raise_if` raises at once when the condition is concrete, and otherwise compiles
``lax.cond(jnp.any(condition), report, nothing)``, where ``report`` is a host callback (``jax.debug.callback``)
that raises the error. The normal path makes no host call; a failing one makes the compiled function fail with a
``jax.errors.JaxRuntimeError`` whose message holds the error's text, instead of returning NaN or a wrong answer;
:func:`checked` turns that back into the error itself, so ``except rfa.InputError`` (:class:`rfa.InputError`, a
``ValueError``: every input error of rfa's attentions, estimators and layers) catches it eagerly and jitted alike.
JAX's log record of the failed callback (``jax.debug.callback failed`` with a traceback) is dropped for these
errors: a caught check prints nothing. rfa checks what only values can tell, where a user's array enters: a traced
mask that kernelized attention cannot apply, a traced additive mask, a positive ``log_decay``, a ``beta`` outside
[0, 2], NaN input to the forecaster. Values rfa's models and layers compute themselves (a sigmoid, a log-sigmoid,
``−exp(A)·softplus(·)``) are not checked: they are in range by construction, and a check per decoded token is a
cost for nothing. ``with rfa.checks.enabled(False):`` turns the checks of values off for callers who validate their
inputs themselves; ``rfa benchmark checks`` measures what they cost.

In a program over several devices (data- or sequence-parallel) every device calls the callback with the
same condition (``partitioned=True``; the condition is one reduced scalar, the same on every device), so a
failing check stops every device's program together and the call raises as on one device. With one device calling
it (JAX's default), the others would wait at their next collective for the one that stopped until XLA aborted the
process.

NaN anywhere in the queries, keys or values of one head turns the whole head's output into NaN
(every output sums over every key). Checking every call for that is not free, so it is opt-in:
inside ``with rfa.checks.nan_checks():`` every attention entry point (``rfa.kernelized_attention``,
``rfa.softmax_attention``, the Flax layers) and every rfa model checks its inputs and raises,
naming the array, when one holds NaN or inf.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as jax_config

from rfa._validation import InputError, is_concrete

Array = jax.Array

# Read while tracing, and part of every jit cache key (as jax_debug_nans is), so a function called inside
# nan_checks() is traced with the checks and outside without them, with no jax.clear_caches (whose use, JAX's own
# issues note, can leave the compiler's caches in a state that crashes a later compilation). JAX offers no
# public way to define such a flag; jax._src.config.bool_state is the one its own flags use.
_NAN_CHECKS = jax_config.bool_state(
    "rfa_nan_checks",
    False,
    "rfa.checks.nan_checks: check attention inputs for NaN and inf.",
    include_in_jit_key=True,
    include_in_trace_context=True,
)
_VALUE_CHECKS = jax_config.bool_state(
    "rfa_value_checks",
    True,
    "rfa.checks.enabled: rfa's checks of values (a mask's pattern, log_decay's sign, beta's range).",
    include_in_jit_key=True,
    include_in_trace_context=True,
)
_CHECK_FAILURE = "_rfa_check_failure"  # marks an error raised by a failed check, for checked() and the log filter
_failures: list[Exception] = []  # the errors raised by failed run-time checks, for checked()


class _DropCheckFailures(logging.Filter):
    """Drops JAX's log record of a failed check (``jax.debug.callback failed`` and a traceback, which JAX writes
    before re-raising): the error reaches the caller, who may catch it; an uncaught one prints as any error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, _CHECK_FAILURE, False)


logging.getLogger("jax._src.debugging").addFilter(_DropCheckFailures())


@contextlib.contextmanager
def enabled(flag: bool = True):
    """Within the block, rfa's checks of values are on (``True``, the default everywhere) or off (``False``).

    The checks of values are those :func:`raise_if` makes: a mask's pattern and sign, a positive ``log_decay``, a
    ``beta`` outside [0, 2], NaN input to the forecaster. Turned off, a bad value gives wrong numbers instead of an
    error, and no check reads a value: no host callback under ``jit``, no wait for a concrete array eagerly. Shape
    and type checks stay. :func:`nan_checks` is its own switch. rfa's models and layers already skip the checks of
    values they compute themselves (a sigmoid's β, ``−exp(A)·softplus(·)``'s decay); this switch is for callers
    who validate their own inputs. The flag is read while a function is traced and is part of JAX's jit cache key,
    as :func:`nan_checks`'s is. ``rfa train`` reads it from ``config.checks``.

    Example:
      >>> q = jnp.ones((1, 4, 2, 8))
      >>> with rfa.checks.enabled(False):
      ...     out = rfa.attention.delta_rule_attention(q, q, q, jnp.full((1, 4, 2), 3.0))  # β = 3: not checked
      >>> out.shape
      (1, 4, 2, 8)
    """
    with _VALUE_CHECKS(bool(flag)):
        yield


def is_enabled() -> bool:
    """False inside ``enabled(False)``."""
    return bool(_VALUE_CHECKS.value)


def call_unchecked(fn: Callable, *args, **kwargs):
    """Calls ``fn`` with the arguments given, inside ``enabled(False)``: how rfa's model cores call the primitives
    with values they computed themselves (a key-padding mask from bools, a log-sigmoid gate, a sigmoid β), which are
    in range by construction. A check there would put a host round trip in every training and decoding step for
    nothing; the arrays a user passes are checked where they enter (the primitives, the layers' masks)."""
    with enabled(False):
        return fn(*args, **kwargs)


def raise_if(
    condition, message: str | Callable[..., str], error: type[Exception] = InputError, *, values: tuple = ()
) -> None:
    """Raises ``error(message)`` when ``condition`` (any boolean array) has a true entry, under ``jit`` too.

    Concrete conditions raise now; traced ones raise when the compiled function runs. A traced check compiles
    ``lax.cond(jnp.any(condition), report, nothing)``: on the normal path the compiled function makes no host
    call; when the condition holds, ``report`` (a ``jax.debug.callback``) raises on the host. Under ``vmap`` the
    ``cond`` runs both branches, and ``report`` raises only for the entries whose condition holds. Inside
    ``jax.shard_map`` (manual mesh axes) a traced condition is not checked: JAX cannot compile the callback there,
    so check the global arrays before entering, as ``rfa.attention.sequence_parallel_attention`` does. Inside
    :func:`enabled` ``(False)`` nothing is checked.

    Args:
      condition: a boolean array (or Python bool).
      message: the error's text, or a function of ``values`` (as NumPy arrays) that writes it, so that a
        traced check can say what a concrete one says.
      error: the exception class raised (on the host; under ``jit`` it surfaces as the cause of a
        ``jax.errors.JaxRuntimeError`` whose message contains the text, and :func:`checked` raises it).
      values: small arrays the message is written from, copied to the host when the check fails.

    Example:
      >>> def f(g):
      ...     rfa.checks.raise_if(g > 0, "log_decay must be <= 0")
      ...     return jnp.exp(g)
      >>> rfa.checks.checked(jax.jit(f))(jnp.array(1.0))
      Traceback (most recent call last):
      ...
      rfa.InputError: log_decay must be <= 0
    """
    if _VALUE_CHECKS.value:
        _raise_if(condition, message, error, values)


def _raise_if(condition, message, error: type[Exception] = InputError, values: tuple = ()) -> None:
    """:func:`raise_if` whatever :func:`enabled` says (the opt-in NaN checks have their own switch)."""

    def text(*host_values) -> str:
        return message if isinstance(message, str) else message(*(np.asarray(v) for v in host_values))

    if is_concrete(condition) and all(is_concrete(v) for v in values):
        if bool(np.any(np.asarray(condition))):
            raise error(text(*values))
        return
    if jax.sharding.get_abstract_mesh().manual_axes:
        # Inside jax.shard_map JAX cannot compile a debug callback over partially manual axes; the entry that
        # enters shard_map (rfa.attention.sequence_parallel_attention) checks the global arrays before it.
        return

    def report(failed, *host_values):
        # The host side touches NumPy only. The arguments arrive as jax.Arrays; np.any(array) would call the
        # array's .any(), a JAX computation dispatched from XLA's callback thread, which deadlocked with an eager
        # op the main thread dispatched meanwhile (a training loop froze after one step on 2 cores).
        if np.asarray(failed).any():
            failure = error(text(*host_values))
            setattr(failure, _CHECK_FAILURE, True)
            _failures.append(failure)
            raise failure

    failed = jnp.any(condition)

    def fail():
        # Called on every device: one failing alone would leave the others waiting at a collective (see above).
        jax.debug.callback(report, failed, *values, partitioned=True)

    jax.lax.cond(failed, fail, lambda: None)


def checked(fn: Callable) -> Callable:
    """``fn`` (a jitted function, or any function that calls one) raising a failed run-time check as the error
    it names, with the eager message, instead of ``jax.errors.JaxRuntimeError``.

    Under ``jit`` a check of values (:func:`raise_if`) fails inside a host callback, and JAX reports that as a
    ``JaxRuntimeError`` carrying the text. The returned function waits for ``fn``'s outputs
    (``jax.block_until_ready``) and re-raises such a failure as itself, an :class:`rfa.InputError` for rfa's
    input checks, so ``except rfa.InputError`` works eagerly and jitted alike. Other runtime errors pass as
    they are.

    Example:
      >>> step = rfa.checks.checked(jax.jit(lambda q, mask: rfa.softmax_attention(q, q, q, mask=mask)))
      >>> q = jnp.ones((1, 4, 2, 8))
      >>> try:
      ...     step(q, jnp.zeros((1, 1, 4, 4)))  # PyTorch's additive "no masking"
      ... except rfa.InputError as error:
      ...     print(str(error).split(":")[0])
      mask has negative entries or is all zeros
    """

    @functools.wraps(fn)
    def call(*args, **kwargs):
        _failures.clear()
        try:
            return jax.block_until_ready(fn(*args, **kwargs))
        except jax.errors.JaxRuntimeError as runtime_error:
            if _failures:
                raise _failures[-1] from runtime_error
            raise

    return call


@contextlib.contextmanager
def nan_checks(enabled: bool = True):
    """Within the block, attention entry points and rfa models raise on NaN or inf input, under ``jit`` too.

    The flag is read while a function is traced and is part of JAX's jit cache key (as ``jax_debug_nans`` is):
    functions called inside are traced with the checks, and outside without them, each compiled once.
    Each check costs a reduction over the array and one host callback per call.

    Example:
      >>> q = jnp.ones((1, 4, 2, 8)).at[0, 1, 0, 0].set(jnp.nan)
      >>> with rfa.checks.nan_checks():
      ...     rfa.softmax_attention(q, q, q)
      Traceback (most recent call last):
      ...
      rfa.InputError: q holds NaN or inf ...
    """
    with _NAN_CHECKS(bool(enabled)):
        yield


def nan_checks_enabled() -> bool:
    """True inside :func:`nan_checks`."""
    return bool(_NAN_CHECKS.value)


def check_finite(*, keep: dict | None = None, **arrays) -> None:
    """Inside :func:`nan_checks`, raises a ValueError naming the first array given by keyword that holds NaN
    or inf (under ``jit`` at run time); outside, does nothing.

    ``keep`` maps an array's name to the positions that reach an output, ``[batch..., heads or 1, L]`` bools
    (a mask's key or query padding) for an array ``[batch..., L, heads, d]``; entries at other positions are not
    checked, as the attention ignores them."""
    if not _NAN_CHECKS.value:
        return
    keep = keep or {}
    for name, x in arrays.items():
        if x is not None:
            bad = ~jnp.isfinite(x)
            if keep.get(name) is not None:
                bad = jnp.any(bad, axis=-1) & jnp.swapaxes(keep[name], -1, -2)
            _raise_if(
                jnp.any(bad),
                f"{name} holds NaN or inf (shape {tuple(jnp.shape(x))}); one such entry in a query, key or value "
                "makes the whole head's attention output NaN. Find where it comes from (jax.debug_nans) or mask "
                "the position out.",
            )
