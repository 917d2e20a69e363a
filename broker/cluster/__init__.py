"""Broker groups (MetaQ's master/slave groups, RocketMQ's HA service): the node's role through ZooKeeper, the sans-IO decisions, commitlog shipping, several groups as one cluster."""
