"""Shared by agent and aggregator: the wire contract (`plumb.v1`, `plumb.facts`) and log format."""
