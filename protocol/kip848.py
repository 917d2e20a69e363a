"""The consumer group protocol's messages (KIP-848): ConsumerGroupHeartbeat (API key 68) and
ConsumerGroupDescribe (69), as kafka-python message classes built from protocol/schemas/, since
kafka-python 3.0 ships no schema for them (Kafka's own classes: ConsumerGroupHeartbeatRequestData
and friends, generated from the same kind of definition)."""

from kafka.protocol.api_message import ApiMessage

from protocol import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas): pass
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas): pass
class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas): pass
class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas): pass
