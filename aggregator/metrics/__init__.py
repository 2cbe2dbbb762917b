"""Every `plumb_` series, read from live state at scrape time."""
