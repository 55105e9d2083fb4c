"""TLS settings and the principal of a TLS client: Kafka's ``ssl.*`` names and rules."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.security import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRuleError,
    PrincipalMapper,
    SslConfigError,
    SslSettings,
    distinguished_name,
)
from tickwheel.server import BrokerConfig

from .certs import Certificates, write_certificates

# SslPrincipalMapperTest's rules and names (Kafka's own examples).
KAFKA_RULES = ", ".join(
    [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return write_certificates(tmp_path_factory.mktemp("certs"))


@pytest.mark.parametrize(
    ("name", "principal"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
        ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
    ],
)
def test_kafkas_mapping_examples(name: str, principal: str) -> None:
    assert PrincipalMapper(KAFKA_RULES).name(name) == principal


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    PrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(SslConfigError, match="invalid rule"):
        PrincipalMapper(rules)


@pytest.mark.parametrize(
    ("rules", "parsed"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/", "[RULE:/.*]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        (
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
        ),
        (",   , , ,      , , ,   ", "[]"),
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
        ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
        ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
        (
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            "/DEFAULT/,DEFAULT",
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
            "/DEFAULT, DEFAULT]",
        ),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, parsed: str) -> None:
    assert str(PrincipalMapper(rules)) == parsed


def test_an_escaped_comma_inside_a_name() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_replacement_references_follow_java() -> None:
    # $4 with three groups is literal text (Kafka's escapeLiteralBackReferences); $12
    # with two groups is group 1 then "2"; "\$" is a dollar.
    mapper = PrincipalMapper(
        "RULE:^CN=(\\w+),OU=(\\w+),O=(\\w+)$/$1@$4/, RULE:^CN=(\\w+),O=(\\w+)$/$12\\$/"
    )
    assert mapper.name("CN=a,OU=b,O=c") == "a@$4"
    assert mapper.name("CN=a,O=b") == "a2$"


def test_no_matching_rule() -> None:
    with pytest.raises(NoMatchingRuleError):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=eng")


def test_a_bad_pattern_is_a_config_error() -> None:
    with pytest.raises(SslConfigError, match="bad pattern"):
        PrincipalMapper("RULE:^CN=(.*$/$1/")


def test_distinguished_names_are_rfc_2253() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "7")),
        (("commonName", " alice#1 "),),
    )
    assert distinguished_name(subject) == "CN=\\ alice#1\\ ,OU=eng+UID=7,O=Example\\, Inc.,C=US"
    assert distinguished_name(((("commonName", "#x"),),)) == "CN=\\#x"


def test_principal_of_a_peer_certificate() -> None:
    mapper = PrincipalMapper("RULE:^CN=([^,]+),.*$/$1/L,DEFAULT")
    certificate = {"subject": ((("organizationName", "example"),), (("commonName", "Alice"),))}
    assert mapper.principal(certificate) == KafkaPrincipal("User", "alice")
    assert PrincipalMapper("DEFAULT").principal(certificate) == KafkaPrincipal(
        "User", "CN=Alice,O=example"
    )
    assert mapper.principal(None) == ANONYMOUS
    assert mapper.principal({}) == ANONYMOUS


def test_server_and_client_contexts_from_pem_stores(certificates: Certificates) -> None:
    settings = SslSettings.from_properties(
        {**certificates.broker_properties(), "ssl.client.auth": "required"}
    )
    server = settings.server_context()
    assert server.verify_mode.name == "CERT_REQUIRED"
    assert (server.minimum_version.name, server.maximum_version.name) == ("TLSv1_2", "TLSv1_3")
    client = settings.client_context()
    assert client.check_hostname
    no_check = SslSettings.from_properties(
        {**certificates.broker_properties(), "ssl.endpoint.identification.algorithm": ""}
    )
    assert not no_check.client_context().check_hostname


def test_inline_pem_key_store(certificates: Certificates) -> None:
    text = certificates.broker.read_text()
    key_end = text.index("-----BEGIN CERTIFICATE-----")
    settings = SslSettings.from_properties(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": text[:key_end],
            "ssl.keystore.certificate.chain": text[key_end:],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": certificates.ca.read_text(),
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    context = settings.server_context()
    assert context.minimum_version.name == context.maximum_version.name == "TLSv1_3"


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({"ssl.keystore.location": "/etc/kafka/broker.jks"}, "ssl.keystore.type=JKS.*PEM"),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "x.p12"},
            "ssl.keystore.type=PKCS12.*openssl pkcs12",
        ),
        ({"ssl.keystore.type": "PEM"}, "needs a key store"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"}, "no key store"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"}, "go together"),
        ({"ssl.client.auth": "sometimes"}, "none, requested, required"),
        ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "OpenSSL knows none"),
    ],
)
def test_bad_settings_are_named(
    certificates: Certificates, properties: dict[str, str], problem: str
) -> None:
    # A good key store unless the case is about the key store.
    about_keystore = any(name.startswith("ssl.keystore") for name in properties)
    base = {} if about_keystore else certificates.broker_properties()
    with pytest.raises(SslConfigError, match=problem):
        SslSettings.from_properties({**base, **properties}).server_context()


def test_a_key_store_that_is_not_pem(tmp_path: Path) -> None:
    (tmp_path / "store.pem").write_bytes(b"\xfe\xed\xfe\xed not a PEM file")
    settings = SslSettings.from_properties(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "store.pem")}
    )
    with pytest.raises(SslConfigError, match="must be PEM"):
        settings.server_context()


def test_listener_overrides_replace_the_broker_wide_settings() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "EXTERNAL://:0,INTERNAL://:0",
            "listener.security.protocol.map": "EXTERNAL:SSL,INTERNAL:SSL",
            "ssl.client.auth": "none",
            "ssl.keystore.location": "/etc/broker.pem",
            "listener.name.internal.ssl.client.auth": "required",
        }
    )
    internal = config.listener_view("INTERNAL")
    external = config.listener_view("EXTERNAL")
    assert (internal["ssl.client.auth"], external["ssl.client.auth"]) == ("required", "none")
    assert internal["ssl.keystore.location"] == "/etc/broker.pem"


@given(
    st.text(alphabet="RULE:DEFAULT/\\$1()[].*^,LU =cnCN", max_size=40),
    st.text(alphabet="CN=OU,alice\\ +", max_size=30),
)
def test_any_rules_text_parses_or_is_a_config_error(rules: str, name: str) -> None:
    """Whatever the setting says, the broker gets a mapper or a clear SslConfigError,
    and a mapper gives a name or NoMatchingRuleError."""
    try:
        mapper = PrincipalMapper(rules)
    except SslConfigError:
        return
    with contextlib.suppress(NoMatchingRuleError):
        mapper.name(name)


def test_an_encrypted_key_needs_its_password_and_never_prompts(
    certificates: Certificates, tmp_path: Path
) -> None:
    text = certificates.broker.read_bytes()
    split = text.index(b"-----BEGIN CERTIFICATE-----")
    key = serialization.load_pem_private_key(text[:split], password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    store = tmp_path / "encrypted.pem"
    store.write_bytes(encrypted + text[split:])
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(store)}
    SslSettings.from_properties({**base, "ssl.key.password": "s3cret"}).server_context()
    for wrong in ({"ssl.key.password": "guess"}, {}):
        with pytest.raises(SslConfigError, match=r"ssl\.key\.password"):
            SslSettings.from_properties({**base, **wrong}).server_context()


def test_the_private_key_and_its_password_stay_out_of_the_repr() -> None:
    settings = SslSettings(
        keystore_key="-----BEGIN ENCRYPTED PRIVATE KEY-----the-key-bytes",
        key_password="key-secret",
    )
    shown = repr(settings)
    assert "the-key-bytes" not in shown
    assert "key-secret" not in shown
