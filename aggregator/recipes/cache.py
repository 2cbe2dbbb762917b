"""A small LRU of resolutions keyed by their inputs, so a pool of identical nodes costs one.

The key is the criteria, the date the lifecycle rule uses, and the node's view (only the facts
recipes read, GPUs reduced to distinct values); hostnames, UUIDs and temperatures do not
split it. One cache serves one catalog and one driver-ownership configuration: reloading
either means a new cache.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Hashable, Mapping

from plumb.aggregator.recipes.catalog import Catalog
from plumb.aggregator.recipes.criteria import Criteria, check_criteria
from plumb.aggregator.recipes.node import NodeView
from plumb.aggregator.recipes.resolve import DriverOwners, Resolution, resolve_view
from plumb.facts import Reading

__all__ = ["ResolutionCache"]


class ResolutionCache:
    """``resolve`` with memory: the last ``maxsize`` distinct inputs and their resolutions."""

    def __init__(
        self, catalog: Catalog, maxsize: int = 1024, *, driver_owners: DriverOwners | None = None
    ):
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.catalog = catalog
        # Configured per pool, fixed for the cache's life, so not part of its keys.
        self.driver_owners = dict(driver_owners or {})
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Hashable, Resolution] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def resolve(
        self,
        criteria: Criteria,
        facts: Mapping[str, Reading] | None = None,
        *,
        as_of: dt.date | None = None,
        view: NodeView | None = None,
    ) -> Resolution:
        """The same Resolution ``resolve(catalog, criteria, facts, as_of=...)`` returns;
        ``view`` is the facts' NodeView (with this catalog's GPU identity) where the caller
        built it already."""
        if view is None and facts is not None:
            view = NodeView.from_facts(facts, self.catalog.gpu_identity)
        day = (as_of or dt.date.today()) if view is not None else None
        key = (criteria, day, view.key() if view is not None else None)
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return found
        self.misses += 1
        check_criteria(self.catalog, criteria)
        resolution = resolve_view(
            self.catalog, criteria, view, as_of=day, driver_owners=self.driver_owners
        )
        self._entries[key] = resolution
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return resolution
