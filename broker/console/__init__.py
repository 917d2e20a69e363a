"""The web console on the admin port (`--admin-port`): RocketMQ's dashboard, what Kafka users get from
AKHQ or Kafka UI. Static pages (static/) over JSON endpoints (routes.py) that read the broker's state
(pages.py, browse.py), keep a few minutes of rates and lag (history.py) and change state only through
the Kafka handlers, as a configured principal (actions.py). docs/extensions.md documents the API."""
