"""rfa 0.2's ``configs`` package, kept for one release: the configs are ``rfa.configs.{tasks,sweeps,studies}`` now
(``rfa configs`` lists them); ``configs.<name>`` still imports from a checkout
(:mod:`rfa.experiments.common.legacy`)."""

from rfa.experiments.common.legacy import alias

alias(__name__)
