"""The SCRAM users and settings of a secured broker group, and the logins and user changes its tests send."""

from __future__ import annotations

from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from tests.kit.wire import WireClient
from tests.security.brokers import STANDARD_AUTHORIZER
from tests.security.round_trips import _last_answer_within


SETTINGS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found": "true"}  # PLAINTEXT clients are User:ANONYMOUS, open to all


def _alter_users(address: str, *alterations) -> list[tuple[str, int]]:
    upsertions = [(a.user, int(a.mechanism), a.iterations, a.salt, a.salted_password) for a in alterations
                  if isinstance(a, UserScramCredentialUpsertion)]
    deletions = [(a.user, int(a.mechanism)) for a in alterations if isinstance(a, UserScramCredentialDeletion)]
    client = WireClient(address)
    try:
        answer = client.request(AlterUserScramCredentialsRequest[0](deletions=deletions, upsertions=upsertions))
    finally:
        client.close()
    return [(r.user, r.error_code) for r in answer.results]


def _users(address: str) -> set[str]:
    """The users a node holds credentials of (polled instead of authenticating: failed
    authentications from one address are slowed down and then refused, connection.failed.*)."""
    client = WireClient(address)
    try:
        return {r.user for r in client.request(DescribeUserScramCredentialsRequest[0](users=None)).results}
    finally:
        client.close()


def _authenticates(address: str, user: str, password: str) -> int:
    return _last_answer_within(address, "SCRAM-SHA-256", user, password, 0, 0).error_code
