"""Consumer groups (Kafka's GroupCoordinator, classic protocol): the sans-IO state machine, its members, the coordinator that runs them."""
