"""Message schemas kafka-python 3.0 does not ship, in its JSON format (the shape of Kafka's own
message definitions), written for Gregor from Kafka 4.4's definitions: the consumer group
protocol of KIP-848, the share groups of KIP-932 and KIP-966's DescribeTopicPartitions.
protocol/kip848.py, protocol/kip932.py and protocol/kip966.py build kafka-python message classes
from them."""
