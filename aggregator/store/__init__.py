"""Persistence: nodes, current facts and fact history in SQL, written in batches."""

from .store import (
    Change,
    HistoryEntry,
    NodeUpdate,
    Store,
    StoredNode,
    StoreError,
    migrate,
)
from .writer import Writer

__all__ = [
    "Change",
    "HistoryEntry",
    "NodeUpdate",
    "Store",
    "StoreError",
    "StoredNode",
    "Writer",
    "migrate",
]
