"""Message schemas kafka-python 3.0 does not ship, in its JSON format (the shape of Kafka's own
message definitions), written for Gregor from Kafka 4.4's definitions: the consumer group
protocol of KIP-848. protocol/kip848.py builds kafka-python message classes from them."""
