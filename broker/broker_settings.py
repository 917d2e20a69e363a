"""A broker's settings in force: the static ones (--config, --set) with the dynamic ones laid over
them, this broker's own over the cluster-wide defaults (Kafka's DynamicBrokerConfig). The dynamic
ones are state records (store/state.py BROKER_CONFIG, node id -1 for a default), in a cluster held
alike by every broker group through ZooKeeper (broker/cluster/security.py); a change that arrives
by replication is put in force when `reload` sees the store's count move. Never talks to clients.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.config import SETTINGS, BrokerConfig
from broker.config_sources import Layers, setting_text
from broker.dynamic_configs import APPLIED, DEFAULT_NODE, DYNAMIC
from broker.security import dynamic_tls
from store.state import BROKER_CONFIG

if TYPE_CHECKING:
    from broker.net.connection_limits import ConnectionCounts
    from store import Store

log = logging.getLogger("gregor.settings")


class BrokerSettings:
    def __init__(self, config: BrokerConfig, store: Store, node_id: int) -> None:
        self.config = config
        self.store = store
        self.node_id = node_id
        self.static_values = dict(config.values)  # before any dynamic value is laid over them
        self.per_broker: dict[str, str] = {}  # this broker's own, listener.name.<l>.ssl.* included
        self.cluster_default: dict[str, str] = {}
        self._seen = -1  # the store's broker_config_changes when last read

    def reload(self) -> bool:
        """Read the dynamic settings again if a record changed since; True if it did."""
        seen = self.store.broker_config_changes
        if seen == self._seen:
            return False
        items = self.store.state_items(BROKER_CONFIG)
        self.per_broker = dynamic_tls.stored(items, self.node_id)
        self.cluster_default = dynamic_tls.stored(items, DEFAULT_NODE)
        self._seen = seen
        return True

    def layers(self) -> Layers:
        return Layers.of(self.per_broker, self.cluster_default, self.static_values, self.config.explicit)

    def current(self) -> dict[str, str]:
        """The text of every setting in force that has one: this broker's, the default, the static,
        Gregor's default, Kafka's default of a setting Gregor does not have."""
        out = {name: default for name, (_, default) in DYNAMIC.items() if default is not None}
        out.update((name, setting_text(value)) for name, value in self.static_values.items())
        out.update(self.cluster_default)
        out.update(self.per_broker)
        return out

    def apply(self, connections: ConnectionCounts) -> None:
        """Put the APPLIED settings in force: config values (read where used), the store's retention
        and log cleaner, the connection limits."""
        for name in APPLIED:
            text = self.per_broker.get(name, self.cluster_default.get(name))
            try:
                self.config.values[name] = self.static_values[name] if text is None else _parsed(name, text)
            except ValueError:  # checked when set; a record written otherwise is not put in force
                log.warning("dynamic setting %s=%r is not a valid value: %s stays %s", name, text, name,
                            self.static_values[name])
                self.config.values[name] = self.static_values[name]
        self.store.reconfigure(self.config.store_config())
        connections.max_total = self.config["max.connections"]
        connections.max_per_ip = self.config["max.connections.per.ip"]


def _parsed(name: str, text: str) -> Any:
    return SETTINGS[name][0](text.strip())
