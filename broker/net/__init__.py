"""Bytes in and out: client connections, listeners, what a handler knows of its connection, the admin HTTP API and its metrics."""
