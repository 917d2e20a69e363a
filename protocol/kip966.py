"""DescribeTopicPartitions (API key 75, KIP-966): the paginated topic description Kafka 4's
`kafka-topics --describe` and admin clients send instead of Metadata, as kafka-python message
classes built from protocol/schemas/ (kafka-python 3.0 ships no schema for it; Kafka's own class
is DescribeTopicPartitionsRequestData, generated from the same kind of definition)."""

from kafka.protocol.api_message import ApiMessage

from protocol import schemas


class DescribeTopicPartitionsRequest(ApiMessage, load_json=schemas): pass
class DescribeTopicPartitionsResponse(ApiMessage, load_json=schemas): pass
