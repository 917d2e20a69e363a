"""Transactions and idempotent producers (Kafka's TransactionCoordinator and ProducerStateManager)."""
