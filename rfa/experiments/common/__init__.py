"""What rfa's commands and experiment families share: command-line plumbing (:mod:`.cli`), the pieces of a report
(:mod:`.report`: verdicts, tables, figures), statistics over seeds and the verdict rule (:mod:`.spread`), one style
per kind in every figure (:mod:`.styles`), one training setting over seeds (:mod:`.seeded`), the settings a study
trains (:mod:`.settings`), timing and memory measurements (:mod:`.timing`), huge pages for the commands
(:mod:`.host_memory`) and rfa 0.2's module names (:mod:`.legacy`). Nothing here imports a command or a family
(sweeps, benchmarks, studies). Importing this package imports nothing.
"""
