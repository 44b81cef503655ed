"""The sweep framework: what runs any sweep, apart from the sweeps themselves (:mod:`rfa.experiments.sweeps`).

:mod:`.registry` holds the experiment kinds and reproductions (one entry each), :mod:`.cells` expands a config into
cells and stores the finished ones in the workdir, :mod:`.config_checks` checks a sweep config, and :mod:`.runner`
runs one sweep into a workdir (cells, tables, figures, report). Nothing here imports a sweep: the shipped kinds and
reproductions register themselves when :mod:`rfa.experiments.sweeps` is imported. Importing this package imports
nothing.
"""
