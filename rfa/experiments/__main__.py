"""``python -m rfa.experiments ARGS`` is the ``rfa ARGS`` command (:mod:`rfa.experiments.command`)."""

from rfa.experiments.command import main

if __name__ == "__main__":
    main()
