"""Plumb's node agent: collects a GPU node's facts and streams them to the aggregator.

Deployed alone in a slim image, so it never imports the aggregator.
"""

__version__ = "0.1.0"
