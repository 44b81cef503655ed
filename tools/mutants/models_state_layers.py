"""Mutants of rfa/models/'s layers with a state: the delta-rule layer (delta_rule.py), the short convolution
(short_convolution.py) and the sliding window (sliding_window.py).

Kept in the order of the one list they came from, under its section headings (the issue or theme that added them).
"""

from .mutant import Mutant
from .paths import HYBRID_TESTS, PACKED_TESTS

MUTANTS = [
    # Length generalization and estimators inside models (issues 30 and 31).
    Mutant(
        "window-ring-off-by-one",
        "rfa/layers/sliding_window.py",
        '        write = (slots == cache["count"][:, None] % slots.size) & keep[:, None]',
        '        write = (slots == (cache["count"][:, None] + 1) % slots.size) & keep[:, None]',
        (HYBRID_TESTS,),
        "decoding overwrites a token still inside the window instead of the one that left it",
    ),
    Mutant(
        "window-prefill-slots",
        "rfa/layers/sliding_window.py",
        "        latest = slots + ring * ((count[:, None] - 1 - slots) // ring)",
        "        latest = slots + ring * ((count[:, None] - 2 - slots) // ring)",
        (HYBRID_TESTS,),
        "a prompt's ring holds the token one turn before the last kept one in that token's slot",
    ),
    Mutant(
        "window-prefill-counts-padding",
        "rfa/layers/sliding_window.py",
        "        count = jnp.sum(key_mask, axis=1, dtype=jnp.int32)",
        "        count = jnp.full(key_mask.shape[:1], key_mask.shape[1], jnp.int32)",
        (HYBRID_TESTS,),
        "a right-padded prompt's padding takes slots of the ring, over the last real tokens",
    ),
    Mutant(
        "padding-shifted-into-conv-history",
        "rfa/layers/short_convolution.py",
        "    last = jnp.sum(keep, axis=1)[:, None] + jnp.arange(taps - 1)",
        "    last = keep.shape[1] + jnp.arange(taps - 1)",
        ("tests/attention/test_state_layers.py",),
        "the short convolution's history is the last K − 1 inputs, padding included, not the last kept ones",
    ),
    Mutant(
        "window-prefill-not-compacted",
        "rfa/layers/sliding_window.py",
        "jnp.take_along_axis(jnp.take_along_axis(y, order, axis=1), index, axis=1)",
        "jnp.take_along_axis(y, index, axis=1)",
        (HYBRID_TESTS,),
        "a prompt's ring is filled by position, so padding before the last kept tokens shifts them out of it",
    ),
    Mutant(
        "conv-over-padding",
        "rfa/layers/short_convolution.py",
        "    order = jnp.argsort(~keep, axis=1, stable=True)  # each row's kept positions first, in order",
        "    order = jnp.broadcast_to(jnp.arange(length), keep.shape)",
        ("tests/attention/test_state_layers.py",),
        "the short convolution runs over padding between tokens instead of skipping it",
    ),
    Mutant(
        "gva-heads-tiled",
        "rfa/layers/delta_rule/layer.py",
        "        q, k = (jnp.repeat(y, hv // h, axis=2) for y in (q, k))",
        "        q, k = (jnp.tile(y, (1, 1, hv // h, 1)) for y in (q, k))",
        ("tests/attention/test_fla_layers.py",),
        "grouped value heads paired with the wrong query/key head",
    ),
    Mutant(
        "negative-eigenvalues-ignored",
        "rfa/layers/delta_rule/layer.py",
        "beta * (2.0 if o.allow_neg_eigval else 1.0)",
        "beta",
        ("tests/attention/test_fla_layers.py",),
        "allow_neg_eigval leaves β in [0, 1]",
    ),
    Mutant(
        "conv-bias-dropped",
        "rfa/layers/delta_rule/layer.py",
        '                qkv = qkv + weights["conv_bias"]',
        "                qkv = qkv",
        ("tests/attention/test_fla_layers.py",),
        "the short convolution's bias (fla's conv_bias) is loaded but not added",
    ),
    Mutant(
        "window-over-positions",
        "rfa/layers/sliding_window.py",
        "        order = jnp.argsort(~key_mask, axis=1, stable=True)  # each row's kept tokens first, in order",
        "        order = jnp.broadcast_to(jnp.arange(key_mask.shape[1]), key_mask.shape)",
        ("tests/attention/test_state_layers.py",),
        "the full pass lays the window over positions, padding included, while the ring counts kept tokens",
    ),
    Mutant(
        "split-conv-history-from-no-block",
        "rfa/layers/short_convolution.py",
        "    return last_kept(jax.lax.axis_index(axis)), invariant(last_kept(flags.shape[0] - 1), axis)",
        "    return history.astype(x.dtype), invariant(last_kept(flags.shape[0] - 1), axis)",
        ("tests/attention/test_sequence_parallel_layers.py",),
        "split along L, each block's convolution starts from the layer's history, not from the blocks before it",
    ),
    Mutant(
        "split-conv-history-skips-the-block-before",
        "rfa/layers/short_convolution.py",
        "        use = flags & (jnp.arange(flags.shape[0]) <= upto)[:, None, None]",
        "        use = flags & (jnp.arange(flags.shape[0]) < upto)[:, None, None]",
        ("tests/attention/test_sequence_parallel_layers.py",),
        "split along L, a block's convolution history leaves out the block just before it",
    ),
    # Packed sequences (segment_ids): a state, a convolution and a window start fresh at a sequence's first token.
    Mutant(
        "packed-conv-history-not-cut",
        "rfa/layers/short_convolution.py",
        "        history = jnp.where(jnp.take_along_axis(index, last[..., None], axis=1) == final, history, 0.0)\n",
        "",
        (PACKED_TESTS,),
        "a packed prefill's convolution history holds inputs of the sequences before the last one",
    ),
]
