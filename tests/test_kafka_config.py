"""KafkaSettings: environment mapping, client renderings, redaction (no broker needed)."""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from faust.auth import GSSAPICredentials, SASLCredentials, SSLCredentials
from streameval.agents.config import (
    DEFAULT_PARTITIONS,
    DEFAULT_TOPIC_PREFIX,
    RECONNECT_BACKOFF_MS,
    ConfigError,
    KafkaSettings,
    redact_config,
)

SECRET = "s3cr3t-PASSWORD"
KEY_SECRET = "k3y-PASSWORD"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A self-signed certificate (used as CA and client cert) and its encrypted key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl command not available")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key),
            "-out", str(cert), "-days", "1", "-subj", "/CN=streameval-test",
            "-passout", f"pass:{KEY_SECRET}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return {"cert": str(cert), "key": str(key)}


def test_defaults_mean_embedded_plaintext() -> None:
    s = KafkaSettings.from_env({})
    assert s.embedded and s.bootstrap_servers is None
    assert s.topic_prefix == DEFAULT_TOPIC_PREFIX and s.partitions == DEFAULT_PARTITIONS
    assert s.effective_protocol == "PLAINTEXT"
    with pytest.raises(ConfigError, match="KAFKA_BOOTSTRAP_SERVERS"):
        s.confluent_config()
    e = s.with_bootstrap("127.0.0.1:9999")
    assert not e.embedded
    # the connection settings every client gets (see RECONNECT_BACKOFF_MS for the backoff)
    assert e.confluent_config() == {
        "bootstrap.servers": "127.0.0.1:9999",
        "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
    }
    assert e.faust_broker_kwargs() == {"broker": "kafka://127.0.0.1:9999"}


def test_bootstrap_list_and_schemes() -> None:
    s = KafkaSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": " kafka://a:9092 , b:9093;c:9094 "})
    assert s.hosts == ["a:9092", "b:9093", "c:9094"]
    assert s.confluent_config()["bootstrap.servers"] == "a:9092,b:9093,c:9094"
    assert s.faust_broker_kwargs()["broker"] == "kafka://a:9092;kafka://b:9093;kafka://c:9094"


def test_prefix_and_partitions() -> None:
    env = {"STREAMEVAL_TOPIC_PREFIX": "exp1-", "STREAMEVAL_PARTITIONS": "12"}
    s = KafkaSettings.from_env(env)
    assert (s.topic_prefix, s.partitions) == ("exp1-", 12)
    assert KafkaSettings.from_env({"STREAMEVAL_TOPIC_PREFIX": ""}).topic_prefix == ""
    with pytest.raises(ConfigError, match="STREAMEVAL_PARTITIONS"):
        KafkaSettings.from_env({"STREAMEVAL_PARTITIONS": "many"})
    with pytest.raises(ConfigError, match="STREAMEVAL_PARTITIONS"):
        KafkaSettings.from_env({"STREAMEVAL_PARTITIONS": "0"})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL"),
        ({"KAFKA_SASL_MECHANISM": "MAGIC"}, "KAFKA_SASL_MECHANISM"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "KAFKA_SASL_USERNAME"),
        ({"KAFKA_SASL_USERNAME": "u"}, "KAFKA_SASL_PASSWORD"),
        ({"KAFKA_SSL_CERTIFICATE_LOCATION": "/c.pem"}, "KAFKA_SSL_KEY_LOCATION"),
        ({"KAFKA_BOOTSTRAP_SERVERS": " , "}, "KAFKA_BOOTSTRAP_SERVERS"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaSettings.from_env(env)


def test_sasl_plaintext_mapping() -> None:
    s = KafkaSettings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
            "KAFKA_SASL_USERNAME": "alice",
            "KAFKA_SASL_PASSWORD": SECRET,
            "KAFKA_SASL_MECHANISM": "scram-sha-512",
        }
    )
    assert s.effective_protocol == "SASL_PLAINTEXT"
    assert s.confluent_config() == {
        "bootstrap.servers": "k:9092",
        "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }
    creds = s.faust_broker_kwargs()["broker_credentials"]
    assert isinstance(creds, SASLCredentials)
    assert (creds.username, creds.password) == ("alice", SECRET)
    assert creds.mechanism.value == "SCRAM-SHA-512"
    assert creds.protocol.value == "SASL_PLAINTEXT" and creds.ssl_context is None


def test_sasl_ssl_mapping(tls_files: dict[str, str]) -> None:
    s = KafkaSettings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "k:9093",
            "KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "KAFKA_SASL_USERNAME": "alice",
            "KAFKA_SASL_PASSWORD": SECRET,
            "KAFKA_SSL_CA_LOCATION": tls_files["cert"],
        }
    )
    conf = s.confluent_config()
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "PLAIN"
    assert conf["ssl.ca.location"] == tls_files["cert"]
    creds = s.faust_broker_kwargs()["broker_credentials"]
    assert isinstance(creds, SASLCredentials)
    assert creds.protocol.value == "SASL_SSL"
    assert isinstance(creds.ssl_context, ssl.SSLContext)
    assert creds.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_mutual_tls_mapping(tls_files: dict[str, str]) -> None:
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": "k:9093",
        "KAFKA_SSL_CA_LOCATION": tls_files["cert"],
        "KAFKA_SSL_CERTIFICATE_LOCATION": tls_files["cert"],
        "KAFKA_SSL_KEY_LOCATION": tls_files["key"],
        "KAFKA_SSL_KEY_PASSWORD": KEY_SECRET,
    }
    s = KafkaSettings.from_env(env)
    assert s.effective_protocol == "SSL"
    assert s.confluent_config() == {
        "bootstrap.servers": "k:9093",
        "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
        "security.protocol": "SSL",
        "ssl.ca.location": tls_files["cert"],
        "ssl.certificate.location": tls_files["cert"],
        "ssl.key.location": tls_files["key"],
        "ssl.key.password": KEY_SECRET,
    }
    creds = s.faust_broker_kwargs()["broker_credentials"]
    assert isinstance(creds, SSLCredentials)
    assert isinstance(creds.context, ssl.SSLContext)
    # a wrong key password is a clear configuration error
    wrong = KafkaSettings.from_env({**env, "KAFKA_SSL_KEY_PASSWORD": "nope"})
    with pytest.raises(ConfigError, match="TLS context"):
        wrong.faust_broker_kwargs()


def test_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    s = KafkaSettings.from_env(
        {"KAFKA_BOOTSTRAP_SERVERS": "k:1", "KAFKA_SSL_CA_LOCATION": str(tmp_path / "none.pem")}
    )
    with pytest.raises(ConfigError, match="TLS context"):
        s.ssl_context()


def test_gssapi_mapping() -> None:
    s = KafkaSettings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
            "KAFKA_SASL_MECHANISM": "GSSAPI",
            "KAFKA_SASL_KERBEROS_SERVICE": "kafka-svc",
        }
    )
    assert s.effective_protocol == "SASL_PLAINTEXT"
    conf = s.confluent_config()
    assert conf["sasl.mechanism"] == "GSSAPI" and conf["sasl.kerberos.service.name"] == "kafka-svc"
    assert "sasl.password" not in conf
    creds = s.faust_broker_kwargs()["broker_credentials"]
    assert isinstance(creds, GSSAPICredentials)
    assert creds.kerberos_service_name == "kafka-svc"


def test_secrets_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    s = KafkaSettings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
            "KAFKA_SASL_USERNAME": "alice",
            "KAFKA_SASL_PASSWORD": SECRET,
            "KAFKA_SSL_KEY_PASSWORD": KEY_SECRET,
            "KAFKA_SSL_CA_LOCATION": "/ca.pem",
        }
    )
    red = s.redacted()
    assert red["KAFKA_SASL_PASSWORD"] == "***" and red["KAFKA_SSL_KEY_PASSWORD"] == "***"
    assert red["KAFKA_SASL_USERNAME"] == "alice"
    assert red["KAFKA_BOOTSTRAP_SERVERS"] == "k:9092"
    assert red["security_protocol (effective)"] == "SASL_SSL"
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("settings %s %r %s", s, s, red)
        logging.getLogger("test").info("conf %s", redact_config(s.confluent_config()))
    for text in (caplog.text, repr(s), str(s), str(red)):
        assert SECRET not in text and KEY_SECRET not in text
    # unset secrets stay None (not a misleading mask)
    assert KafkaSettings().redacted()["KAFKA_SASL_PASSWORD"] is None


def test_faust_app_kwargs_build_an_app() -> None:
    import faust

    s = KafkaSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": "k:9092", "STREAMEVAL_PARTITIONS": "6"})
    kwargs = s.faust_app_kwargs(web_port=6100)
    assert kwargs["topic_partitions"] == 6 and kwargs["broker"] == "kafka://k:9092"
    assert kwargs["broker_session_timeout"] <= 10 and kwargs["web_port"] == 6100
    app = faust.App("streameval-config-test", **kwargs)
    assert app.conf.topic_partitions == 6
    assert app.conf.broker_session_timeout == kwargs["broker_session_timeout"]
    assert str(app.conf.broker[0]) == "kafka://k:9092"
