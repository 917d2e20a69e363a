"""Share groups' messages (KIP-932): ShareGroupHeartbeat (API key 76), ShareGroupDescribe (77),
ShareFetch (78) and ShareAcknowledge (79), as kafka-python message classes built from
protocol/schemas/, since kafka-python 3.0 ships no schema for them (Kafka's own classes:
ShareFetchRequestData and friends, generated from the same kind of definition)."""

from kafka.protocol.api_message import ApiMessage

from protocol import schemas


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas): pass
class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas): pass
class ShareGroupDescribeRequest(ApiMessage, load_json=schemas): pass
class ShareGroupDescribeResponse(ApiMessage, load_json=schemas): pass
class ShareFetchRequest(ApiMessage, load_json=schemas): pass
class ShareFetchResponse(ApiMessage, load_json=schemas): pass
class ShareAcknowledgeRequest(ApiMessage, load_json=schemas): pass
class ShareAcknowledgeResponse(ApiMessage, load_json=schemas): pass
