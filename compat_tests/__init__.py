"""Client-matrix compatibility suite: the same scenarios, run by every client, against any Kafka broker."""
