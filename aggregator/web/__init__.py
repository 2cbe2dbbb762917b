"""The web page served at `/`: fleet overview and node pages (read scope), and its sign-in."""

from plumb.aggregator.web.routes import router

__all__ = ["router"]
