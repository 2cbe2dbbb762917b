"""The HTTP API: thin FastAPI routers over `aggregator.core.Core`."""

from plumb.aggregator.api.app import create_app

__all__ = ["create_app"]
