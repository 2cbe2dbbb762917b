"""Shipped simulated-node profiles (YAML package data, loaded by `agent.profile`)."""
