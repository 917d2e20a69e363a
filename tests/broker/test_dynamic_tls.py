"""broker/security/dynamic_tls.py without a broker: which names are a listener's dynamic TLS settings, how
they lay over the static ones, and which new files a listener may take."""

from __future__ import annotations

import pytest

from broker.config import SETTINGS
from broker.security.dynamic_tls import (
    built_at_start,
    certificate,
    change_problem,
    effective,
    split,
    state_key,
    stored,
)
from broker.net.listeners import ListenerError, tls_context
from tests.security.tls import make_certificates, server_keystore

STATIC = {name: default for name, (_, default, _) in SETTINGS.items()}


def test_only_prefixed_tls_file_settings_are_dynamic():
    assert split("listener.name.SSL.ssl.keystore.location") == ("ssl", "ssl.keystore.location")
    assert split("listener.name.sasl_ssl.ssl.key.password") == ("sasl_ssl", "ssl.key.password")
    assert split("listener.name.replication.ssl.truststore.location") == ("replication", "ssl.truststore.location")
    for name in ("ssl.keystore.location", "listener.name.ssl.ssl.client.auth", "listener.name..ssl.key.password",
                 "log.retention.ms"):
        assert split(name) is None, name


def test_a_nodes_settings_lay_over_the_static_ones_for_their_listener_only():
    items = [(state_key(1, "listener.name.ssl.ssl.keystore.location"), b"/new.pem"),
             (state_key(2, "listener.name.ssl.ssl.keystore.location"), b"/other-node.pem")]
    mine = stored(items, 1)
    assert mine == {"listener.name.ssl.ssl.keystore.location": "/new.pem"}
    static = {**STATIC, "ssl.keystore.location": "/static.pem"}
    assert effective(static, mine, "SSL")["ssl.keystore.location"] == "/new.pem"
    assert effective(static, mine, "sasl_ssl")["ssl.keystore.location"] == "/static.pem"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    made = make_certificates(directory)
    return directory, made


def settings(keystore) -> dict:
    return {**STATIC, "ssl.keystore.location": str(keystore)}


def test_a_renewed_certificate_may_replace_the_served_one_and_another_subject_may_not(certs):
    directory, made = certs
    served = certificate(str(made.server_keystore))
    assert served["subject"]
    assert change_problem(served, settings(server_keystore(directory, "renewed")), False, False) is None
    other = server_keystore(directory, "other", subject="/O=Gregor tests/CN=other")
    assert "Keystore DistinguishedName does not match" in change_problem(served, settings(other), False, False)
    assert change_problem(served, settings(other), True, False) is None
    fewer_names = server_keystore(directory, "fewer", names="DNS:localhost")
    assert "Keystore SubjectAltName does not match" in change_problem(served, settings(fewer_names), False, False)
    assert change_problem(served, settings(fewer_names), False, True) is None
    bad = directory / "bad.pem"
    bad.write_text("not a keystore")
    assert "cannot load its key and certificate chain" in change_problem(served, settings(bad), True, True)
    assert certificate(str(bad)) == {}


def test_at_start_a_dynamic_setting_that_no_longer_loads_falls_back_to_the_static_one(certs):
    _, made = certs
    static = settings(made.server_keystore)
    gone = {**static, "ssl.keystore.location": "/nonexistent/keystore.pem"}
    context, used = built_at_start(tls_context, gone, static, "listener SSL")
    assert used == static and context is not None
    with pytest.raises(ListenerError):
        built_at_start(tls_context, gone, gone, "listener SSL")  # nothing to fall back to
