"""The web page served at `/`: fleet overview and node pages, read scope only."""

from plumb.aggregator.web.routes import router

__all__ = ["router"]
