"""ml-collections configs, one per experiment or reproduction: ``get_config(arg)`` with variants."""
