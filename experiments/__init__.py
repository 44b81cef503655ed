"""Experiments and benchmarks built on the rfa package."""
