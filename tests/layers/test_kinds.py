"""The registry of attention kinds and variants, and the sites made of them (``rfa.layers.kinds``,
``rfa.models.Site``)."""

import dataclasses

import pytest
from helpers import own_estimators, own_kinds

import rfa
from rfa.layers import (
    AttentionKind,
    KernelizedOptions,
    SoftmaxCore,
    SoftmaxOptions,
    attention_kind,
    projected,
    register_attention_kind,
    register_variant,
    registered_attention_kinds,
    registered_variants,
    variant,
)
from rfa.models import Site


def test_every_kind_is_one_entry_and_the_variants_name_settings_of_them():
    assert set(registered_attention_kinds()) == {
        "softmax", "fourier", "kernelized", "linformer", "sliding_window", "deltanet", "gated_deltanet", "kda", "mla"
    }  # fmt: skip
    variants = registered_variants()
    assert {"exact", "positive", "gla", "gated_rfa", "hybrid_kda", "deltanet", "sliding_window"} <= set(variants)
    assert "softmax" not in variants and "kernelized" not in variants  # "exact", "positive": their default options
    assert "gaussian_trig" not in variants  # an estimator of the Gaussian kernel is no attention
    assert [attention_kind(k).causal_only for k in ("deltanet", "softmax", "linformer")] == [True, False, False]
    assert {attention_kind(k).cache for k in registered_attention_kinds()} == {"fixed", "length", None}
    assert variant("hybrid_kda") == (None, {}, ("kda", "kda", "kda", "exact"))


def test_a_site_is_a_kind_and_its_options_made_from_a_variants_name():
    assert Site("gla") == Site("kernelized", estimator="elu", gated=True, gate="feature")
    assert Site("positive", num_features=16).options == KernelizedOptions(num_features=16)
    assert Site("oprf").replace(num_features=8).options.num_features == 8
    assert dataclasses.replace(Site("exact"), num_kv_heads=2) == Site(num_kv_heads=2)
    assert Site("sliding_window", window=8).options.size() == 8 and Site("elu").options.size() is None
    assert Site("gated_deltanet", qk_map="positive", num_features=16).options.size() == 16
    with pytest.raises(rfa.InputError, match=r"a tuple of sites"):
        Site("hybrid_kda")
    with pytest.raises(TypeError, match=r"takes the kind's options built \(KernelizedOptions\)"):
        Site("kernelized", SoftmaxOptions())
    with pytest.raises(rfa.InputError, match=r"KernelizedOptions.gate must be one of \['head', 'feature'\]"):
        Site("positive", gate="token")
    with pytest.raises(rfa.InputError, match=r"SlidingWindowOptions.window must be an int >= 1"):
        Site("sliding_window", window=0)


def test_a_registered_estimator_is_a_variant_and_a_kind_is_registered_once():
    with own_estimators():
        rfa.register_estimator(dataclasses.replace(rfa.estimator("positive"), name="my_positive"))
        assert "my_positive" in registered_variants() and Site("my_positive").options.estimator == "my_positive"
    assert "my_positive" not in registered_variants()
    with own_kinds():
        kind = AttentionKind("mine", SoftmaxOptions, projected(SoftmaxCore), True, True, True, "length")
        register_attention_kind(kind)
        register_variant("mine_gqa", "mine", num_kv_heads=2)
        assert Site("mine_gqa").options.num_kv_heads == 2 and "mine" in registered_variants()
        with pytest.raises(rfa.InputError, match="'mine' is registered already"):
            register_attention_kind(kind)
        with pytest.raises(rfa.InputError, match="variant 'mine_gqa' is registered already"):
            register_variant("mine_gqa", "mine")
    assert "mine" not in registered_attention_kinds()
    with pytest.raises(rfa.InputError, match="cache must be one of"):
        AttentionKind("bad", SoftmaxOptions, projected(SoftmaxCore), True, True, True, None)
    with pytest.raises(TypeError, match="options must be a subclass of KindOptions"):
        AttentionKind("bad", dict, projected(SoftmaxCore), True, True, True, "length")
    with pytest.raises(rfa.InputError, match=r"attention kind must be one of \['deltanet', .*'softmax'"):
        attention_kind("positive")  # a variant, not a kind
