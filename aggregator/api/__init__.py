"""The HTTP API: thin FastAPI routers over `aggregator.core.Core`."""

from aggregator.api.app import create_app

__all__ = ["create_app"]
