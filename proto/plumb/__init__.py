"""Plumb's wire contract: generated messages in `plumb.v1`, flat-path helpers in `plumb.facts`."""
