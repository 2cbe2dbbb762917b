"""Simulated nodes: the fake NVML, profiles and the files a simulated host is made of."""
