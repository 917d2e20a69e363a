"""Share groups' messages (KIP-932): ShareGroupHeartbeat (API key 76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79) and the share-group offset admin calls (90-92), as
kafka-python message classes built from
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
class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass
class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass
class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass
class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass
class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass
class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass
