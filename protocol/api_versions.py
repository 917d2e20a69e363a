"""The one table of APIs Gregor advertises, and the kafka-python classes that
encode and decode them.

Ranges follow docs/protocol.md (what the Kafka clients Gregor serves ask for): they
contain every exact version older librdkafka probes for. Produce starts at 0
(KAFKA-18659) and, like Fetch from 0 and ListOffsets from 0, serves clients of
message format v0/v1: their message sets are converted on append and on fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol import admin, consumer, metadata, producer, sasl
from kafka.protocol.api_message import ApiMessage

from protocol import kip848, kip932, kip966


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    request: type[ApiMessage]
    response: type[ApiMessage]

    def flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)


def _spec(request: type[ApiMessage], response: type[ApiMessage], lo: int, hi: int) -> ApiSpec:
    return ApiSpec(request.API_KEY, request.name.removesuffix("Request"), lo, hi, request, response)


API_SPECS: dict[int, ApiSpec] = {s.api_key: s for s in (
    _spec(producer.ProduceRequest, producer.ProduceResponse, 0, 11),
    _spec(consumer.FetchRequest, consumer.FetchResponse, 0, 18),
    _spec(consumer.ListOffsetsRequest, consumer.ListOffsetsResponse, 0, 7),
    _spec(metadata.MetadataRequest, metadata.MetadataResponse, 0, 12),
    _spec(consumer.OffsetCommitRequest, consumer.OffsetCommitResponse, 2, 9),
    _spec(consumer.OffsetFetchRequest, consumer.OffsetFetchResponse, 1, 9),
    _spec(metadata.FindCoordinatorRequest, metadata.FindCoordinatorResponse, 0, 6),
    _spec(consumer.JoinGroupRequest, consumer.JoinGroupResponse, 0, 9),
    _spec(consumer.HeartbeatRequest, consumer.HeartbeatResponse, 0, 4),
    _spec(consumer.LeaveGroupRequest, consumer.LeaveGroupResponse, 0, 5),
    _spec(consumer.SyncGroupRequest, consumer.SyncGroupResponse, 0, 5),
    _spec(admin.DescribeGroupsRequest, admin.DescribeGroupsResponse, 0, 5),
    _spec(admin.ListGroupsRequest, admin.ListGroupsResponse, 0, 5),
    _spec(metadata.ApiVersionsRequest, metadata.ApiVersionsResponse, 0, 4),
    _spec(admin.CreateTopicsRequest, admin.CreateTopicsResponse, 2, 7),
    _spec(admin.DeleteTopicsRequest, admin.DeleteTopicsResponse, 1, 6),
    _spec(producer.InitProducerIdRequest, producer.InitProducerIdResponse, 0, 5),
    _spec(producer.AddPartitionsToTxnRequest, producer.AddPartitionsToTxnResponse, 0, 3),  # v4+: brokers only
    _spec(producer.AddOffsetsToTxnRequest, producer.AddOffsetsToTxnResponse, 0, 4),
    _spec(producer.EndTxnRequest, producer.EndTxnResponse, 0, 4),
    _spec(producer.TxnOffsetCommitRequest, producer.TxnOffsetCommitResponse, 0, 4),
    _spec(consumer.OffsetForLeaderEpochRequest, consumer.OffsetForLeaderEpochResponse, 2, 4),
    _spec(admin.DescribeConfigsRequest, admin.DescribeConfigsResponse, 1, 4),
    _spec(admin.AlterConfigsRequest, admin.AlterConfigsResponse, 0, 2),
    _spec(admin.IncrementalAlterConfigsRequest, admin.IncrementalAlterConfigsResponse, 0, 1),
    _spec(admin.DescribeAclsRequest, admin.DescribeAclsResponse, 0, 3),
    _spec(admin.CreateAclsRequest, admin.CreateAclsResponse, 0, 3),
    _spec(admin.DeleteAclsRequest, admin.DeleteAclsResponse, 0, 3),
    _spec(admin.DeleteRecordsRequest, admin.DeleteRecordsResponse, 0, 2),
    _spec(admin.CreatePartitionsRequest, admin.CreatePartitionsResponse, 0, 3),
    _spec(admin.DeleteGroupsRequest, admin.DeleteGroupsResponse, 0, 2),
    _spec(admin.DescribeClusterRequest, admin.DescribeClusterResponse, 0, 1),
    _spec(sasl.SaslHandshakeRequest, sasl.SaslHandshakeResponse, 0, 1),
    _spec(sasl.SaslAuthenticateRequest, sasl.SaslAuthenticateResponse, 0, 2),
    _spec(admin.DescribeUserScramCredentialsRequest, admin.DescribeUserScramCredentialsResponse, 0, 0),
    _spec(admin.AlterUserScramCredentialsRequest, admin.AlterUserScramCredentialsResponse, 0, 0),
    _spec(admin.DescribeTransactionsRequest, admin.DescribeTransactionsResponse, 0, 0),
    _spec(admin.ListTransactionsRequest, admin.ListTransactionsResponse, 0, 1),
    _spec(kip966.DescribeTopicPartitionsRequest, kip966.DescribeTopicPartitionsResponse, 0, 0),
    _spec(kip848.ConsumerGroupHeartbeatRequest, kip848.ConsumerGroupHeartbeatResponse, 0, 1),
    _spec(kip848.ConsumerGroupDescribeRequest, kip848.ConsumerGroupDescribeResponse, 0, 1),
    _spec(kip932.ShareGroupHeartbeatRequest, kip932.ShareGroupHeartbeatResponse, 1, 1),
    _spec(kip932.ShareGroupDescribeRequest, kip932.ShareGroupDescribeResponse, 1, 1),
    _spec(kip932.ShareFetchRequest, kip932.ShareFetchResponse, 1, 2),
    _spec(kip932.ShareAcknowledgeRequest, kip932.ShareAcknowledgeResponse, 1, 2),
    _spec(kip932.DescribeShareGroupOffsetsRequest, kip932.DescribeShareGroupOffsetsResponse, 0, 1),
    _spec(kip932.AlterShareGroupOffsetsRequest, kip932.AlterShareGroupOffsetsResponse, 0, 0),
    _spec(kip932.DeleteShareGroupOffsetsRequest, kip932.DeleteShareGroupOffsetsResponse, 0, 0),
)}

# Broker-to-broker APIs: decoded and answered, never advertised to clients (Kafka's "broker"
# listener APIs). WriteTxnMarkers carries a transaction's markers to another broker group's master.
INTER_BROKER_SPECS: dict[int, ApiSpec] = {s.api_key: s for s in (
    _spec(producer.WriteTxnMarkersRequest, producer.WriteTxnMarkersResponse, 1, 1),
)}

SPECS_BY_NAME: dict[str, ApiSpec] = {s.name: s for s in (*API_SPECS.values(), *INTER_BROKER_SPECS.values())}

API_VERSIONS_KEY = 18

# ApiVersions v3+ features (KIP-584): only those whose protocol Gregor serves, as name ->
# (min, max) supported level and the finalized level. group.version 1: KIP-848 consumer groups;
# share.version 1: share groups (KIP-932), 2: their dead-letter topics (KIP-1191). Not listed
# (level 0 for clients): transaction.version, whose level 2 would switch the Java 4.x producer to
# KIP-890 part 2 transactions, streams.version (KIP-1071), metadata.version and kraft.version
# (KRaft), eligible.leader.replicas.version (KIP-966's ELR).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"group.version": (0, 1), "share.version": (0, 2)}
FINALIZED_FEATURES: dict[str, int] = {"group.version": 1, "share.version": 2}
# Kafka's finalized features epoch only grows, and a client keeps the features of the highest it
# saw: raised by one whenever FINALIZED_FEATURES changes, so a client learns of the change.
FINALIZED_FEATURES_EPOCH = 1
