"""Benchmarks: scripts that print figures against a peer measured in the same run. Not CI."""
