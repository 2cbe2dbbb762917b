"""Plumb aggregator: ingests agents' facts, keeps the live state and its history."""

__version__ = "0.1.0"
