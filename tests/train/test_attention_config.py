"""A training config's attention as the sites of its model (``rfa.train.attention``): each variant's fields, the
kind's size from ``attention.num_features``, the gate at the decoder only, fitted parameters fixed where a site
decodes from a state, a kind that cannot run a site leaving it exact, and the stacks."""

import rfa
from rfa.models import Site
from rfa.train import ATTENTION_VARIANTS, check_config, model_config, task_config


def sites(arg, task="sort", **fields):
    config = task_config(task, arg)
    for name, value in fields.items():
        config.attention[name] = value
    model = model_config(config, check_config(config))
    return model.encoder_attention, model.decoder_attention, model.cross_attention


def test_each_site_of_a_training_config_is_its_variant_with_the_configs_options():
    assert ATTENTION_VARIANTS["gla"] == {"kind": "elu", "gated": True, "gate": "feature"}
    encoder, decoder, cross = sites("gated_rfa,quick")
    assert decoder == Site("gated_rfa", num_features=16, chunk_size=8)
    assert encoder == cross == Site("rfa", num_features=16, chunk_size=8)  # the gate at the decoder only
    standard = tuple(rfa.estimator("oprf").standard_params(16).items())
    encoder, decoder, cross = sites("oprf,quick")
    assert encoder.options.feature_params == () and decoder.options.feature_params == cross.options.feature_params
    assert decoder.options.feature_params == tuple((name, float(value)) for name, value in standard)
    encoder, decoder, cross = sites("sliding_window,quick", num_features=6)
    assert encoder == decoder == Site("sliding_window", window=6) and cross == Site()  # no window across sequences
    encoder, decoder, cross = sites("deltanet,quick")
    assert (encoder, cross) == (Site(), Site()) and decoder == Site("deltanet", chunk_size=8, num_features=16)
    encoder, decoder, cross = sites("linformer,quick")
    assert encoder == cross == Site("linformer", projected_length=16) and decoder == Site()


def test_a_stack_is_one_site_per_layer_of_its_pattern():
    _, decoder, _ = sites("hybrid_gated_deltanet")
    assert [site.kind for site in decoder] == ["gated_deltanet", "softmax"]
    assert rfa.train.results.recorded_num_features(task_config("sort", "sliding_window").attention) == 64
