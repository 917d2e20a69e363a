"""broker/cluster/sasl.py's login between two nodes, both ends in one trio run over an in-memory
stream pair: what each end concludes, and the refusal's text the connecting node is given."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.cluster.sasl import AuthenticationRefused, NodeSasl, accept, login
from broker.security.sasl import new_credential

CREDENTIALS = {(m, "node"): new_credential(m, "node-secret") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
CREDENTIALS[("SCRAM-SHA-256", "intruder")] = new_credential("SCRAM-SHA-256", "intruder-secret")


def node(mechanism: str = "SCRAM-SHA-512", user: str = "node", password: str = "node-secret",
         accepted: tuple[str, ...] = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")) -> NodeSasl:
    return NodeSasl(mechanism, user, password, accepted, failure_delay_s=0.0)


def run(connecting: NodeSasl, accepting: NodeSasl, allowed=lambda principal, host: True,
        failures: list[str] | None = None) -> tuple[str | None, str | None]:
    """(the principal the accepting end let in, or None; the connecting end's refusal text or
    None). Failed authentications are appended to `failures`."""
    results: dict[str, object] = {}
    failures = [] if failures is None else failures

    async def main() -> None:
        left, right = trio.testing.memory_stream_pair()

        async def server() -> None:
            results["accepted"] = await accept(accepting, right, "127.0.0.1",
                                               lambda m, u: CREDENTIALS.get((m, u)), allowed, failures.append)
            await right.aclose()

        async def client() -> None:
            try:
                await login(connecting, left, "node 1")
                results["refused"] = None
            except AuthenticationRefused as exc:
                results["refused"] = str(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(server)
            nursery.start_soon(client)

    trio.run(main)
    return results["accepted"], results["refused"]  # type: ignore[return-value]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_a_node_logs_in_with_each_mechanism(mechanism):
    assert run(node(mechanism), node()) == ("User:node", None)


def test_a_wrong_password_is_refused_at_both_ends_and_counts_as_a_failed_authentication():
    failures: list[str] = []
    accepted, refused = run(node(password="guess"), node(), failures=failures)
    assert accepted is None and failures == ["127.0.0.1"]
    assert refused == ("node 1 refused SASL SCRAM-SHA-512 login as node: Authentication failed during "
                       "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_a_mechanism_the_accepting_node_does_not_take_is_refused():
    failures: list[str] = []
    accepted, refused = run(node("PLAIN"), node(accepted=("SCRAM-SHA-512",)), failures=failures)
    assert failures == []  # as at a listener, an unsupported mechanism is not a failed authentication
    assert accepted is None and "mechanism 'PLAIN' is not one this node accepts (SCRAM-SHA-512)" in refused


def test_a_principal_not_allowed_cluster_action_is_refused():
    failures: list[str] = []
    accepted, refused = run(node("SCRAM-SHA-256", "intruder", "intruder-secret"), node(),
                            allowed=lambda principal, host: principal == "User:node", failures=failures)
    assert accepted is None and failures == []  # authenticated, not authorized
    assert refused.endswith("principal User:intruder is not allowed ClusterAction on the cluster (super.users or an ACL)")
    assert run(node("SCRAM-SHA-256"), node(), allowed=lambda principal, host: principal == "User:node") == \
        ("User:node", None)


def test_a_user_name_with_scram_escapes_logs_in():
    CREDENTIALS[("SCRAM-SHA-512", "n=o,de")] = new_credential("SCRAM-SHA-512", "s")
    assert run(node(user="n=o,de", password="s"), node()) == ("User:n=o,de", None)


def test_a_node_without_sasl_is_refused_without_an_answer():
    async def main() -> bool:
        left, right = trio.testing.memory_stream_pair()
        await left.send_all(b"GRHA\x02" + bytes(20))  # a follower's HELLO
        return await accept(node(), right, "127.0.0.1", lambda m, u: None, lambda p, h: True, failures.append)

    failures: list[str] = []
    assert trio.run(main) is None and failures == []
