"""rfa's experiments (installed with ``rfa[experiments]``), in one shape:

- the command lines, at the top: ``command`` (the ``rfa`` console script; ``python -m rfa.experiments`` is ``rfa``)
  and the commands it runs, ``train``, ``decode``, ``prepare_data``, ``sweep``, ``reproduce`` and ``tables``, each
  also ``python -m rfa.experiments.<name>``;
- what they share, in ``rfa.experiments.common`` (command-line plumbing, report pieces, statistics over seeds,
  figure styles, timing, the settings the studies train, huge pages, rfa 0.2's module names);
- the experiment families: sweeps and reproductions (``rfa.experiments.sweeps``, run by the sweep framework
  ``rfa.experiments.sweep_framework``), benchmarks (``rfa.experiments.benchmarks``, one package each: ``rfa
  benchmark NAME``) and training studies (``rfa.experiments.studies``, one package each: ``rfa study NAME``). A
  family imports no module inside another (what two share lives in ``common``), and a benchmark's or a study's
  ``report.py`` renders its tables and figures from its JSON alone, as ``rfa tables`` does.

Importing this package imports nothing.
"""
