"""Test certificates (trustme): a CA, the brokers' key store, a client's, as PEM files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Certificates:
    """PEM files under one directory: the CA, a broker's key store (key + chain, for
    127.0.0.1 and localhost), and a client's key and certificate
    (``CN=alice,OU=eng,O=example``)."""

    ca: Path
    broker: Path
    client_key: Path
    client_cert: Path
    authority: trustme.CA

    def broker_properties(self) -> dict[str, str]:
        """A broker's ``ssl.*`` settings with these stores."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.broker),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }

    def client_properties(
        self, protocol: str = "SSL", *, with_certificate: bool = False
    ) -> dict[str, str]:
        """librdkafka's settings for a TLS listener (``protocol`` SSL or SASL_SSL),
        trusting this CA, presenting the client certificate when told."""
        settings = {"security.protocol": protocol, "ssl.ca.location": str(self.ca)}
        if with_certificate:
            settings["ssl.certificate.location"] = str(self.client_cert)
            settings["ssl.key.location"] = str(self.client_key)
        return settings


def write_certificates(directory: Path) -> Certificates:
    """A fresh CA with a broker and a client certificate, written under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA(organization_name="tickwheel tests")
    broker = authority.issue_cert("127.0.0.1", "localhost")
    client = authority.issue_cert(
        "alice@example.com",
        common_name="alice",
        organization_name="example",
        organization_unit_name="eng",
    )
    paths = Certificates(
        ca=directory / "ca.pem",
        broker=directory / "broker.pem",
        client_key=directory / "client.key",
        client_cert=directory / "client.pem",
        authority=authority,
    )
    authority.cert_pem.write_to_path(str(paths.ca))
    broker.private_key_and_cert_chain_pem.write_to_path(str(paths.broker))
    client.private_key_pem.write_to_path(str(paths.client_key))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    return paths
