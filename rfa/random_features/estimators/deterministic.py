"""Deterministic feature maps, baselines that estimate no kernel.

- relu: ``relu(Wx) + ε`` (Performer's "generalized attention", Choromanski et al., ICLR 2021), m features.
- elu: ``elu(x) + 1`` (Katharopoulos et al., "Transformers are RNNs", ICML 2020), d features, no projection.
"""

from __future__ import annotations

import jax

from rfa.random_features.feature_maps import FeatureMap, no_log, project, register_feature_map


def _relu(x, W, *, epsilon=1e-3):
    return no_log(jax.nn.relu(project(x, W)) + epsilon)


def _elu(x, W):
    del W  # elu+1 is deterministic: it has no projection.
    return no_log(jax.nn.elu(x) + 1.0)


register_feature_map(FeatureMap("relu", _relu, None, 1, temperature_scaled=True, positive=True, params=("epsilon",)))
register_feature_map(FeatureMap("elu", _elu, None, 0, temperature_scaled=False, positive=True))
