"""Tag-filtered views (MetaQ §7.3): read-only topics that mirror a source topic's
partitions and carry only the records whose tag is one of the view's tags.

A view is a topic in the store's registry whose configs hold `view.source` and
`view.tags`; it has no data of its own. Every read of a view goes to its source.
This module owns the view definition and its validation; it never reads records
(see broker/views/fetch.py) and never writes to the store.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store import TAG_HEADER, TopicMeta, tag_hash

VIEW_SOURCE = "view.source"
VIEW_TAGS = "view.tags"


@dataclass(frozen=True, slots=True)
class View:
    name: str
    source: str
    tags: tuple[bytes, ...]

    def tag_hashes(self) -> np.ndarray:
        """The consume-queue hashes of the view's tags (computed per call: the hash is the store's)."""
        return np.array(sorted({tag_hash(t) for t in self.tags}), dtype=np.int64)


def parse_tags(text: str) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(t.strip().encode() for t in text.split(",") if t.strip()))


def view_of(meta: TopicMeta | None) -> View | None:
    """The view a topic defines, or None for an ordinary topic."""
    if meta is None or not meta.configs.get(VIEW_SOURCE):
        return None
    return View(meta.name, meta.configs[VIEW_SOURCE], parse_tags(meta.configs.get(VIEW_TAGS, "")))


def is_view_config(configs: dict[str, str | None]) -> bool:
    return VIEW_SOURCE in configs or VIEW_TAGS in configs


def view_config_error(name: str, configs: dict[str, str | None],
                      topics: dict[str, TopicMeta]) -> str | None:
    """Why CreateTopics must refuse this view (INVALID_CONFIG), or None when it is a valid view."""
    source = configs.get(VIEW_SOURCE)
    if not source:
        return f"A view needs {VIEW_SOURCE}=<topic> as well as {VIEW_TAGS}."
    if not parse_tags(configs.get(VIEW_TAGS) or ""):
        return f"View '{name}' needs {VIEW_TAGS}=<tag>[,<tag>...] with at least one tag."
    others = set(configs) - {VIEW_SOURCE, VIEW_TAGS}
    if others:
        return f"A view takes only {VIEW_SOURCE} and {VIEW_TAGS}; not {', '.join(sorted(others))}."
    if source == name:
        return f"View '{name}' cannot be its own source."
    meta = topics.get(source)
    if meta is None:
        return f"The source topic '{source}' of view '{name}' does not exist."
    if view_of(meta) is not None:
        return f"The source '{source}' of view '{name}' is itself a view; views of views are not supported."
    if not meta.configs.get(TAG_HEADER):
        return (f"The source topic '{source}' has no {TAG_HEADER} config, so its records carry no tag hashes "
                f"to filter on; create it with {TAG_HEADER}=<header name>.")
    return None


def views_of(topics: dict[str, TopicMeta], source: str) -> list[str]:
    """Names of the views whose source is `source`."""
    return sorted(m.name for m in topics.values() if m.configs.get(VIEW_SOURCE) == source)


def data_topic(topics: dict[str, TopicMeta], name: str) -> str:
    """The topic whose store partitions hold `name`'s data: the source for a view, else itself."""
    view = view_of(topics.get(name))
    return view.source if view is not None else name
