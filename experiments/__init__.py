"""rfa 0.2's ``experiments`` package, kept for one release: its modules are ``rfa.experiments.*`` now (commands:
``rfa --help``); ``python -m experiments.<module>`` still runs from a checkout
(:mod:`rfa.experiments.common.legacy`)."""

from rfa.experiments.common.legacy import alias

alias(__name__)
