"""Benchmarks: scripts that time and measure rfa (attention, decoding, sweeps, model scaling) and write JSON and
figures; each is a command (``rfa benchmark attention``).
"""
