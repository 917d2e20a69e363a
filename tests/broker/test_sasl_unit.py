"""broker/security/sasl.py against RFC 7677's test vector, kafka-python's own SCRAM client, and Kafka 3.9's
PlainSaslServer / ScramSaslServer / SaslServerAuthenticator wording."""

import base64
import hashlib
import re

import pytest
from kafka.net.sasl.scram import ScramClient, xor_bytes

from broker.security.sasl import (
    ILLEGAL_SASL_STATE,
    MAX_TOKEN_BYTES,
    SASL_AUTHENTICATION_FAILED,
    AuthenticationFailed,
    Authenticator,
    credential_from_salted,
    decode_credential,
    encode_credential,
    new_credential,
)

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
INVALID_USER_OR_PASSWORD = "Authentication failed: Invalid username or password"
OTHER_AUTHZID = "Authentication failed: Client requested an authorization id that is different from username"
TOO_BIG = "Failing SASL authentication due to invalid receive size"


def invalid_credentials(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def users(**credentials):
    """A lookup over {user: [credential, ...]}, recording what it was asked."""
    asked = []

    def lookup(mechanism, user):
        asked.append((mechanism, user))
        return next((c for c in credentials.get(user, []) if c.mechanism == mechanism), None)
    lookup.asked = asked
    return lookup


def fails(authenticator, token, message):
    with pytest.raises(AuthenticationFailed) as info:
        authenticator.step(token)
    assert str(info.value) == message
    return info.value


# ---- SCRAM ----

def test_rfc7677_sha256_exchange_gives_the_rfc_messages():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    lookup = users(user=[new_credential("SCRAM-SHA-256", "pencil", 4096, salt=salt)])
    server = Authenticator("SCRAM-SHA-256", lookup, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert not server.done
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert (server.done, server.principal) == (True, "user")


def exchange(mechanism, lookup, user, password, tamper=None):
    """kafka-python's client against the Authenticator; `tamper` rewrites the client-final message."""
    client = ScramClient(user, password, mechanism)
    server = Authenticator(mechanism, lookup)
    client.process_server_first_message(server.step(client.first_message()))
    final = client.final_message()
    client.process_server_final_message(server.step(tamper(client, final) if tamper else final))
    return server


@pytest.mark.parametrize("mechanism", SCRAM)
def test_kafka_python_client_logs_in_and_verifies_the_server(mechanism):
    server = exchange(mechanism, users(alice=[new_credential(mechanism, "s3cret")]), "alice", "s3cret")
    assert (server.done, server.principal) == (True, "alice")


@pytest.mark.parametrize("mechanism", SCRAM)
def test_wrong_password_fails_with_kafkas_generic_message(mechanism):
    with pytest.raises(AuthenticationFailed) as info:
        exchange(mechanism, users(alice=[new_credential(mechanism, "s3cret")]), "alice", "guess")
    assert str(info.value) == invalid_credentials(mechanism)
    assert info.value.error_code == SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize("mechanism", SCRAM)
def test_unknown_user_fails_at_the_first_message(mechanism):
    server = Authenticator(mechanism, users(alice=[new_credential(mechanism, "s3cret")]))
    fails(server, ScramClient("bob", "s3cret", mechanism).first_message(), invalid_credentials(mechanism))
    assert not server.done


@pytest.mark.parametrize("mechanism", SCRAM)
def test_credential_of_the_other_mechanism_does_not_count(mechanism):
    other = SCRAM[1 - SCRAM.index(mechanism)]
    server = Authenticator(mechanism, users(alice=[new_credential(other, "s3cret")]))
    fails(server, ScramClient("alice", "s3cret", mechanism).first_message(), invalid_credentials(mechanism))


def resign(client, final, old: bytes, new: bytes):
    """The client-final message with `old` replaced by `new` and a proof the password makes for it:
    a client that knows the password but replays or alters a field."""
    without_proof = final[:final.rindex(b",p=")].replace(old, new)
    auth_message = client.auth_message[:client.auth_message.rindex(b",c=")] + b"," + without_proof
    proof = xor_bytes(client.client_key, client.hmac(client.stored_key, auth_message))
    return without_proof + b",p=" + base64.b64encode(proof)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_final_nonce_other_than_the_servers_fails_even_when_signed(mechanism):
    def replay(client, final):
        return resign(client, final, client.nonce, client.nonce[:-1] + b"!")
    with pytest.raises(AuthenticationFailed) as info:
        exchange(mechanism, users(alice=[new_credential(mechanism, "s3cret")]), "alice", "s3cret", replay)
    assert str(info.value) == invalid_credentials(mechanism)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_channel_binding_altered_after_signing_fails(mechanism):
    def tamper(client, final):
        return final.replace(b"c=biws,", b"c=eSws,")  # "y,," instead of "n,,"
    with pytest.raises(AuthenticationFailed) as info:
        exchange(mechanism, users(alice=[new_credential(mechanism, "s3cret")]), "alice", "s3cret", tamper)
    assert str(info.value) == invalid_credentials(mechanism)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_proof_altered_fails(mechanism):
    def tamper(client, final):
        head, proof = final.split(b",p=")
        return head + b",p=" + base64.b64encode(bytes(b ^ 1 for b in base64.b64decode(proof)))
    with pytest.raises(AuthenticationFailed) as info:
        exchange(mechanism, users(alice=[new_credential(mechanism, "s3cret")]), "alice", "s3cret", tamper)
    assert str(info.value) == invalid_credentials(mechanism)


def scram_server(user="alice", password="s3cret", mechanism="SCRAM-SHA-256", **kwargs):
    return Authenticator(mechanism, users(**{user: [new_credential(mechanism, password)]}), **kwargs)


@pytest.mark.parametrize("first", [
    b"p=tls-server-end-point,,n=alice,r=abc",  # channel binding requested
    b"y,,n=alice,r=abc",
    b"n,,n=alice",  # no nonce
    b"n=alice,r=abc",  # no gs2 header
    b"n,,n=al=ice,r=abc",  # `=` not escaped
    "n,,n=alicé,r=abc".encode(),  # Kafka's grammar is ASCII only
    "n,,n=alice,r=abc,foo=é".encode(),
    b"",
])
def test_malformed_client_first_message_fails_with_the_generic_message(first):
    fails(scram_server(), first, invalid_credentials("SCRAM-SHA-256"))


def test_authzid_other_than_the_user_is_refused_with_kafkas_message():
    fails(scram_server(), b"n,a=bob,n=alice,r=abc", OTHER_AUTHZID)


def test_authzid_equal_to_the_user_is_accepted():
    assert scram_server().step(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")


def test_escaped_saslname_is_the_user_name_unescaped():
    mechanism = "SCRAM-SHA-256"
    lookup = users(**{"a,b=c": [new_credential(mechanism, "s3cret")]})
    client = ScramClient("a=2Cb=3Dc", "s3cret", mechanism)  # kafka-python sends the name as given
    server = Authenticator(mechanism, lookup)
    client.process_server_first_message(server.step(client.first_message()))
    client.process_server_final_message(server.step(client.final_message()))
    assert server.principal == "a,b=c" and lookup.asked == [(mechanism, "a,b=c")]


def test_delegation_token_login_is_refused_without_a_lookup():
    lookup = users(alice=[new_credential("SCRAM-SHA-256", "s3cret")])
    server = Authenticator("SCRAM-SHA-256", lookup)
    failure = fails(server, b"n,,n=alice,r=abc,tokenauth=true", invalid_credentials("SCRAM-SHA-256"))
    assert failure.reason == "Token Authentication failed: Invalid tokenId : alice" and lookup.asked == []


def test_other_extensions_are_ignored():
    assert scram_server().step(b"n,,n=alice,r=abc,tokenauth=false,foo=bar").startswith(b"r=abc")


def test_stored_credential_below_kafkas_minimum_iterations_fails():
    weak = credential_from_salted("SCRAM-SHA-256", b"salt", 4095, b"x" * 32)
    server = Authenticator("SCRAM-SHA-256", users(alice=[weak]))
    fails(server, b"n,,n=alice,r=abc", invalid_credentials("SCRAM-SHA-256"))


def test_lookup_error_fails_with_the_generic_message():
    def broken(mechanism, user):
        raise ValueError("corrupt credential value")
    fails(Authenticator("SCRAM-SHA-512", broken), b"n,,n=alice,r=abc", invalid_credentials("SCRAM-SHA-512"))


def test_reauthentication_failure_says_re_authentication():
    server = scram_server(reauthenticating=True)
    fails(server, b"n,,n=bob,r=abc", "Authentication failed during re-authentication due to invalid "
                                     "credentials with SASL mechanism SCRAM-SHA-256")


def test_server_nonce_is_kafkas_random_base36_appended_to_the_clients():
    nonces = {scram_server().step(b"n,,n=alice,r=abc").split(b",")[0] for _ in range(3)}
    assert len(nonces) == 3
    assert all(re.fullmatch(rb"r=abc[0-9a-z]{20,26}", n) for n in nonces)


def test_token_after_success_is_an_illegal_sasl_state():
    server = exchange("SCRAM-SHA-256", users(alice=[new_credential("SCRAM-SHA-256", "pw")]), "alice", "pw")
    failure = fails(server, b"n,,n=alice,r=abc", "SaslAuthenticate request received after successful authentication")
    assert failure.error_code == ILLEGAL_SASL_STATE and server.done


def test_token_after_a_failure_is_refused_even_when_right():
    server = Authenticator("PLAIN", users(alice=[new_credential("SCRAM-SHA-256", "s3cret")]))
    fails(server, b"\0alice\0guess", INVALID_USER_OR_PASSWORD)
    failure = fails(server, b"\0alice\0s3cret", "Unexpected challenge in Sasl server state FAILED")
    assert failure.error_code == ILLEGAL_SASL_STATE and not server.done


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_token_over_the_maximum_size_fails(mechanism):
    server = scram_server() if mechanism != "PLAIN" else Authenticator("PLAIN", users())
    fails(server, b"n,,n=alice,r=" + b"a" * (MAX_TOKEN_BYTES - 12), TOO_BIG)


def test_token_of_exactly_the_maximum_size_is_read():
    server = scram_server()
    assert server.step(b"n,,n=alice,r=" + b"a" * (MAX_TOKEN_BYTES - 13)).startswith(b"r=aaa")


# ---- PLAIN ----

@pytest.mark.parametrize("mechanism", SCRAM)
def test_plain_password_checked_against_the_scram_credential(mechanism):
    server = Authenticator("PLAIN", users(alice=[new_credential(mechanism, "s3cret")]))
    assert server.step(b"\0alice\0s3cret") == b""
    assert (server.done, server.principal) == (True, "alice")


def test_plain_authzid_equal_to_the_user_is_accepted():
    server = Authenticator("PLAIN", users(alice=[new_credential("SCRAM-SHA-256", "s3cret")]))
    server.step(b"alice\0alice\0s3cret")
    assert server.principal == "alice"


def test_plain_accepts_a_password_either_credential_holds():
    lookup = users(alice=[new_credential("SCRAM-SHA-512", "old"), new_credential("SCRAM-SHA-256", "new")])
    server = Authenticator("PLAIN", lookup)
    server.step(b"\0alice\0new")
    assert server.done and lookup.asked == [("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "alice")]


def test_plain_wrong_password_and_unknown_user_get_the_same_message():
    lookup = users(alice=[new_credential("SCRAM-SHA-512", "s3cret")])
    fails(Authenticator("PLAIN", lookup), b"\0alice\0guess", INVALID_USER_OR_PASSWORD)
    fails(Authenticator("PLAIN", lookup), b"\0bob\0s3cret", INVALID_USER_OR_PASSWORD)


def test_plain_authzid_other_than_the_user_is_refused():
    server = Authenticator("PLAIN", users(alice=[new_credential("SCRAM-SHA-256", "s3cret")]))
    fails(server, b"bob\0alice\0s3cret", OTHER_AUTHZID)
    assert not server.done


def test_plain_checks_the_password_before_the_authzid():
    server = Authenticator("PLAIN", users(alice=[new_credential("SCRAM-SHA-256", "s3cret")]))
    fails(server, b"bob\0alice\0guess", INVALID_USER_OR_PASSWORD)


@pytest.mark.parametrize(("token", "count"), [
    (b"alice", 1), (b"alice\0s3cret", 2), (b"\0alice\0s3cret\0", 4), (b"a\0b\0c\0d\0e", 4), (b"", 1)])
def test_plain_token_without_two_nuls_is_refused(token, count):
    fails(Authenticator("PLAIN", users()), token, f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}")


@pytest.mark.parametrize(("token", "message"), [
    (b"\0\0s3cret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
])
def test_plain_empty_user_or_password_is_refused(token, message):
    fails(Authenticator("PLAIN", users(alice=[new_credential("SCRAM-SHA-256", "s3cret")])), token, message)


def test_plain_lookup_error_says_credentials_could_not_be_verified():
    def broken(mechanism, user):
        raise ValueError("corrupt credential value")
    fails(Authenticator("PLAIN", broken), b"\0alice\0s3cret",
          "Authentication failed: credentials for user could not be verified")


# ---- credentials ----

@pytest.mark.parametrize("mechanism", SCRAM)
def test_credential_from_salted_equals_new_credential(mechanism):
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac(mechanism[6:].replace("-", "").lower(), b"s3cret", salt, 8192)
    assert credential_from_salted(mechanism, salt, 8192, salted) == new_credential(mechanism, "s3cret", 8192, salt)


def test_new_credential_salts_are_random_base36_like_kafkas():
    salts = {new_credential("SCRAM-SHA-256", "pw").salt for _ in range(3)}
    assert len(salts) == 3 and all(re.fullmatch(rb"[0-9a-z]{20,26}", s) for s in salts)


@pytest.mark.parametrize(("iterations", "message"), [(4095, "Too few iterations"), (16385, "Too many iterations")])
def test_new_credential_keeps_kafkas_iteration_bounds(iterations, message):
    with pytest.raises(ValueError, match=message):
        new_credential("SCRAM-SHA-256", "pw", iterations)


def test_credential_repr_hides_the_keys():
    c = new_credential("SCRAM-SHA-256", "pw", salt=b"salt")
    assert c.stored_key.hex() not in repr(c) and repr(c.stored_key) not in repr(c)


@pytest.mark.parametrize("mechanism", SCRAM)
def test_credential_value_round_trips(mechanism):
    c = new_credential(mechanism, "s3cret", 5000)
    data = encode_credential(c)
    assert data[:2] == bytes([1, SCRAM.index(mechanism) + 1])
    assert decode_credential(mechanism, data) == c


def test_truncated_or_padded_credential_value_is_refused():
    data = encode_credential(new_credential("SCRAM-SHA-512", "s3cret"))
    for size in range(len(data)):
        with pytest.raises(ValueError):
            decode_credential("SCRAM-SHA-512", data[:size])
    with pytest.raises(ValueError):
        decode_credential("SCRAM-SHA-512", data + b"\0")


def test_credential_value_of_another_mechanism_or_version_is_refused():
    data = encode_credential(new_credential("SCRAM-SHA-256", "s3cret"))
    with pytest.raises(ValueError):
        decode_credential("SCRAM-SHA-512", data)
    with pytest.raises(ValueError):
        decode_credential("SCRAM-SHA-256", b"\2" + data[1:])
    with pytest.raises(ValueError):
        decode_credential("SCRAM-SHA-256", data[:1] + b"\2" + data[2:])
