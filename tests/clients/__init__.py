"""Tests that drive real non-Python Kafka clients (Java kafka-clients, kcat) against Gregor."""
