"""rfa 0.2's ``experiments`` package, kept for one release: its modules are ``rfa.experiments.*`` now (commands:
``rfa --help``); ``python -m experiments.<module>`` still runs from a checkout (:mod:`rfa.experiments.legacy`)."""

from rfa.experiments.legacy import alias

alias(__name__)
