"""The server side of Kafka's SASL exchange (SaslAuthenticate, or bare tokens after SaslHandshake
v0): PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Apache Kafka 3.9's broker
runs them, and the salted SCRAM credential Gregor keeps per user and mechanism.

Sans-IO: tokens in, tokens out. It never touches a socket, a clock or the store; credentials come
through a lookup callable. PBKDF2 costs milliseconds, so callers run `Authenticator.step`,
`new_credential` and `credential_from_salted` off the event loop. It never keeps a password.

Failure messages are Kafka's. Where Kafka's SaslServer raises SaslAuthenticationException, its
text reaches the client; where it raises SaslException, the client gets SaslServerAuthenticator's
generic text instead, which never says whether the user exists. The SaslException text is kept in
`AuthenticationFailed.reason`, for the broker's log only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.state import credential_key

if TYPE_CHECKING:
    from store import Store

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_TOKEN_BYTES = 524288  # Kafka's sasl.server.max.receive.size default
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE = 58, 34

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism.type
MECHANISM_NAMES = {v: k for k, v in MECHANISM_CODES.items()}
_PLAIN_ORDER = ("SCRAM-SHA-512", "SCRAM-SHA-256")  # the credentials PLAIN checks a password against


_JAAS = re.compile(r'\s*([\w.$]+)\s+(?:required|requisite|sufficient|optional)\s*'
                   r'((?:[\w.]+\s*=\s*"(?:[^"\\]|\\.)*"\s*)*);?\s*', re.DOTALL)
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_login(text: str) -> tuple[str, dict[str, str]] | None:
    """Kafka's sasl.jaas.config, one login module: `<class> required key="value" ...;` as (class,
    options), a backslash escaping the next character inside quotes (as Java's JAAS parser); None
    when the text is not of that form."""
    m = _JAAS.fullmatch(text)
    if m is None:
        return None
    return m.group(1), {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(m.group(2))}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps of a password (RFC 5802 §3): enough to verify a proof, not to log in."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r}") from None


def _base36_random() -> str:
    """Kafka's ScramFormatter.secureRandomString: a 130-bit random number in base 36."""
    n, digits = secrets.randbits(130), ""
    while True:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if not n:
            return digits


def _salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password, salt, iterations)  # RFC 5802 Hi()


def _stored_key(mechanism: str, salted_password: bytes) -> bytes:
    name = _hash_name(mechanism)
    return hashlib.new(name, hmac.digest(salted_password, b"Client Key", name)).digest()


def new_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    """A credential for `password`; the salt, unless given, is Kafka's (secureRandomBytes: the
    UTF-8 of a random base-36 string). Kafka's iteration bounds apply, with its wording."""
    _hash_name(mechanism)
    if iterations < MIN_ITERATIONS:
        raise ValueError("Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise ValueError("Too many iterations")
    if not password:
        raise ValueError("Password must not be empty")
    salt = _base36_random().encode() if salt is None else bytes(salt)
    return credential_from_salted(mechanism, salt, iterations,
                                  _salted_password(mechanism, password.encode(), salt, iterations))


def credential_from_salted(mechanism: str, salt: bytes, iterations: int,
                           salted_password: bytes) -> ScramCredential:
    """The credential for what AlterUserScramCredentials carries (the client salts the password)."""
    name = _hash_name(mechanism)
    if iterations <= 0:
        raise ValueError(f"iterations must be positive, not {iterations}")
    return ScramCredential(mechanism, bytes(salt), iterations, _stored_key(mechanism, salted_password),
                           hmac.digest(salted_password, b"Server Key", name))


# Credential value, version 1, big-endian:
#   u8 version (1) | u8 mechanism (Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512)
#   | i32 iterations | u32 salt length | salt | stored key | server key
# The two keys are the hash's size each: 32 bytes (SHA-256) or 64 (SHA-512).
_CREDENTIAL_HEAD = struct.Struct(">BBiI")
_CREDENTIAL_VERSION = 1


def encode_credential(c: ScramCredential) -> bytes:
    """The durable value of a credential (layout above)."""
    size = hashlib.new(_hash_name(c.mechanism)).digest_size
    if len(c.stored_key) != size or len(c.server_key) != size:
        raise ValueError(f"{c.mechanism} keys are {size} bytes")
    head = _CREDENTIAL_HEAD.pack(_CREDENTIAL_VERSION, MECHANISM_CODES[c.mechanism], c.iterations, len(c.salt))
    return head + c.salt + c.stored_key + c.server_key


def decode_credential(mechanism: str, data: bytes) -> ScramCredential:
    """A credential from its durable value; ValueError if the value is not one for `mechanism`."""
    size = hashlib.new(_hash_name(mechanism)).digest_size
    data = bytes(data)
    if len(data) < _CREDENTIAL_HEAD.size:
        raise ValueError(f"credential value of {len(data)} bytes is truncated")
    version, kind, iterations, salt_len = _CREDENTIAL_HEAD.unpack_from(data)
    if version != _CREDENTIAL_VERSION:
        raise ValueError(f"credential value version {version} is unknown")
    if kind != MECHANISM_CODES[mechanism]:
        raise ValueError(f"credential value of mechanism type {kind} is not {mechanism}'s")
    if iterations <= 0:
        raise ValueError(f"credential value has {iterations} iterations")
    end = _CREDENTIAL_HEAD.size + salt_len
    if len(data) != end + 2 * size:
        raise ValueError(f"credential value is {len(data)} bytes, its header says {end + 2 * size}")
    return ScramCredential(mechanism, data[_CREDENTIAL_HEAD.size:end], iterations,
                           data[end:end + size], data[end + size:])


class AuthenticationFailed(Exception):
    """Carries the error message Kafka's broker puts in SaslAuthenticateResponse.error_message
    (error code SASL_AUTHENTICATION_FAILED = 58), as Kafka words it for this failure. `reason`
    says more, for the log only (never a password or proof); `error_code` is Kafka's for it."""

    def __init__(self, message: str, *, reason: str | None = None,
                 error_code: int = SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.message, self.reason, self.error_code = message, reason or message, error_code


# RFC 5802's grammar as Kafka's ScramMessages writes it (ASCII only; `,` separates attributes).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = "[a-zA-Z0-9/+]"
_BASE64 = f"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},"
                           rf"p=(?P<proof>{_BASE64})")


def _username(saslname: str) -> str:
    """RFC 5802 saslname unescaping, in Kafka's order (ScramFormatter.username)."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError("Invalid username")
    return name.replace("=3D", "=")


class Authenticator:
    """One client's exchange for one mechanism. `step` takes each client token in turn and returns
    the server's token; `done` and `principal` (the user name; the broker makes it `User:<name>`)
    are set once it succeeded. After a failure the connection closes, as Kafka's does."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None], *,
                 nonce: Callable[[], str] | None = None, reauthenticating: bool = False) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SASL mechanism Gregor serves: {mechanism!r}")
        self.mechanism = mechanism
        self.done = False
        self.principal: str | None = None
        self._lookup = lookup
        self._nonce = nonce or _base36_random
        during = "re-authentication" if reauthenticating else "authentication"
        # SaslServerAuthenticator's answer to any SaslException
        self._generic = (f"Authentication failed during {during} due to invalid credentials with SASL "
                         f"mechanism {mechanism}")
        self._state = "first"  # first -> final (SCRAM only) -> complete | failed
        self._credential: ScramCredential | None = None
        self._bare = self._server_first = self._combined_nonce = self._user = ""
        self.claimed = ""  # the user name the client gave, once read (failed logins count by it)

    def step(self, token: bytes) -> bytes:
        """The server's answer to one client token (b"" when it has none). Raises
        AuthenticationFailed with Kafka's message; the exchange is then over. Kafka checks the size
        of the whole request against MAX_TOKEN_BYTES and closes the connection without an answer
        when it is bigger; this checks the token itself. A token after success gets KafkaApis's
        answer, ILLEGAL_SASL_STATE (the connection stays open there)."""
        if self._state == "complete":
            raise AuthenticationFailed("SaslAuthenticate request received after successful authentication",
                                       error_code=ILLEGAL_SASL_STATE)
        if self._state == "failed":
            raise AuthenticationFailed("Unexpected challenge in Sasl server state FAILED",
                                       error_code=ILLEGAL_SASL_STATE)
        try:
            if len(token) > MAX_TOKEN_BYTES:
                raise AuthenticationFailed("Failing SASL authentication due to invalid receive size",
                                           reason=f"a token of {len(token)} bytes, more than {MAX_TOKEN_BYTES}")
            if self.mechanism == "PLAIN":
                answer = self._plain(bytes(token))
            elif self._state == "first":
                answer = self._scram_first(bytes(token))
            else:
                answer = self._scram_final(bytes(token))
        except AuthenticationFailed:
            self._state, self._credential = "failed", None
            raise
        return answer

    def _invalid(self, reason: str) -> AuthenticationFailed:
        return AuthenticationFailed(self._generic, reason=reason)

    def _succeed(self, user: str) -> None:
        self._state, self._credential, self.done, self.principal = "complete", None, True, user

    # ---- PLAIN (Kafka's PlainSaslServer: every failure is a SaslAuthenticationException) ----
    def _plain(self, token: bytes) -> bytes:
        tokens = token.decode("utf-8", "replace").split("\0", 3)  # authzid NUL authcid NUL passwd
        if len(tokens) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        self.claimed = user
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        try:
            valid = self._plain_password_matches(user, password.encode())
        except Exception as exc:
            raise AuthenticationFailed("Authentication failed: credentials for user could not be verified",
                                       reason=f"credential lookup for {user!r} failed: {exc!r}") from exc
        if not valid:
            raise AuthenticationFailed("Authentication failed: Invalid username or password",
                                       reason=f"wrong password or unknown user {user!r}")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._succeed(user)
        return b""

    def _plain_password_matches(self, user: str, password: bytes) -> bool:
        """Gregor keeps no plain password: the user's SCRAM credentials verify it."""
        for mechanism in _PLAIN_ORDER:
            c = self._lookup(mechanism, user)
            if c is not None and hmac.compare_digest(
                    _stored_key(mechanism, _salted_password(mechanism, password, c.salt, c.iterations)),
                    c.stored_key):
                return True
        return False

    # ---- SCRAM (Kafka's ScramSaslServer) ----
    def _scram_first(self, token: bytes) -> bytes:
        m = _CLIENT_FIRST.fullmatch(token.decode("utf-8", "replace"))
        if m is None:
            raise self._invalid("Invalid SCRAM client first message format")
        saslname, client_nonce = m["saslname"], m["nonce"]
        extensions = dict(e.split("=", 1) for e in m["extensions"][1:].split(",")) if m["extensions"] else {}
        try:
            user = _username(saslname)
        except ValueError:
            raise self._invalid("Authentication failed: Credentials could not be obtained") from None
        self.claimed = user
        if extensions.get("tokenauth", "").lower() == "true":  # Gregor issues no delegation tokens
            raise self._invalid(f"Token Authentication failed: Invalid tokenId : {user}")
        try:
            credential = self._lookup(self.mechanism, user)
        except Exception as exc:
            raise self._invalid(f"Authentication failed: Credentials could not be obtained ({exc!r})") from exc
        if credential is None:
            raise self._invalid(f"Authentication failed: Invalid user credentials (user {user!r})")
        if m["authzid"] and m["authzid"] != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise self._invalid(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                                f"for {self.mechanism.replace('-', '_')}")
        # Kafka signs the messages as it rebuilds them from their parts, not as received: no
        # reserved m= part, and extensions in its HashMap's order (the same for one extension).
        self._bare = f"n={saslname},r={client_nonce}" + "".join(f",{k}={v}" for k, v in extensions.items())
        self._combined_nonce = client_nonce + self._nonce()
        self._server_first = (f"r={self._combined_nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._credential, self._user, self._state = credential, user, "final"
        return self._server_first.encode()

    def _scram_final(self, token: bytes) -> bytes:
        m = _CLIENT_FINAL.fullmatch(token.decode("utf-8", "replace"))
        if m is None:
            raise self._invalid("Invalid SCRAM client final message format")
        nonce = m["nonce"]
        if not nonce.endswith(self._combined_nonce):  # Kafka's test, not equality
            raise self._invalid("Invalid client nonce in the final client message.")
        # Kafka does not compare the channel binding with the gs2 header; it is signed, re-encoded.
        channel = base64.b64encode(base64.b64decode(m["channel"])).decode()
        without_proof = f"c={channel},r={nonce}"
        auth_message = f"{self._bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        assert credential is not None
        name = _hash_name(self.mechanism)
        client_signature = hmac.digest(credential.stored_key, auth_message, name)
        proof = base64.b64decode(m["proof"])
        # Kafka fails a proof of the wrong length with no answer at all (an unchecked exception)
        if len(proof) != len(client_signature):
            raise self._invalid(f"a client proof of {len(proof)} bytes")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
            raise self._invalid(f"Invalid client credentials (user {self._user!r})")
        server_signature = hmac.digest(credential.server_key, auth_message, name)
        self._succeed(self._user)
        return b"v=" + base64.b64encode(server_signature)


def stored_credentials(store: Store) -> Callable[[str, str], ScramCredential | None]:
    """(mechanism, user) -> the user's credential for that SCRAM mechanism as the store holds it
    (written by AlterUserScramCredentials or `gregor user add`), or None: what a listener's and the
    replication port's SASL logins check."""
    def find(mechanism: str, user: str) -> ScramCredential | None:
        value = store.state_value(credential_key(MECHANISM_CODES[mechanism], user))
        return None if value is None else decode_credential(mechanism, value)
    return find
