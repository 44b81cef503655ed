"""The delta rule's layers (DeltaNet, Gated DeltaNet, Kimi Delta Attention): their options
(:mod:`~rfa.layers.delta_rule.options`), the layer (:mod:`~rfa.layers.delta_rule.layer`) and the kinds of a model's
site (:mod:`~rfa.layers.delta_rule.site`)."""
