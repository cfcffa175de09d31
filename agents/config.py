"""Kafka connection settings, read from the environment.

One :class:`KafkaSettings` object describes where the pipeline's Kafka lives and
how to authenticate to it; it renders the same settings for both client
libraries the project uses:

* :meth:`KafkaSettings.confluent_config` -- a librdkafka configuration dict for
  confluent-kafka producers, consumers and admin clients (replay, tests, tools);
* :meth:`KafkaSettings.faust_broker_kwargs` -- ``broker`` and
  ``broker_credentials`` keyword arguments for :class:`faust.App`.

Environment variables (all optional):

=================================  ===========================================
``KAFKA_BOOTSTRAP_SERVERS``        ``host:port[,host:port...]``; unset: the
                                   embedded Tansu broker (:mod:`streameval.agents.broker`)
``KAFKA_SECURITY_PROTOCOL``        ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``,
                                   ``SASL_SSL``; unset: inferred (``SASL_*``
                                   when a SASL user is set, ``*SSL`` when any
                                   ``KAFKA_SSL_*`` file is set)
``KAFKA_SASL_MECHANISM``           ``PLAIN`` (default with a user),
                                   ``SCRAM-SHA-256``, ``SCRAM-SHA-512``,
                                   ``GSSAPI``
``KAFKA_SASL_USERNAME``            SASL user
``KAFKA_SASL_PASSWORD``            SASL password (never logged)
``KAFKA_SASL_KERBEROS_SERVICE``    Kerberos service name for ``GSSAPI``
                                   (default ``kafka``)
``KAFKA_SSL_CA_LOCATION``          PEM file of the CA that signed the brokers
``KAFKA_SSL_CERTIFICATE_LOCATION`` client certificate (PEM) for mutual TLS
``KAFKA_SSL_KEY_LOCATION``         client private key (PEM)
``KAFKA_SSL_KEY_PASSWORD``         password of the private key (never logged)
``STREAMEVAL_TOPIC_PREFIX``        prefix of every topic name (default
                                   ``streameval.``)
``STREAMEVAL_PARTITIONS``          partitions of every topic (default 4)
=================================  ===========================================

Secrets are kept out of ``repr`` and :meth:`KafkaSettings.redacted`, so logging a
settings object never prints a password.
"""

from __future__ import annotations

import dataclasses
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TOPIC_PREFIX = "streameval."
DEFAULT_PARTITIONS = 4
SECRET_MASK = "***"
#: The fetch settings of a consumer that waits for what is produced while it waits (``run``'s
#: inline consumer, its results waiter): an empty partition answers within 50 ms, not
#: librdkafka's default 500, so a message is read at most ~50 ms after it was produced.
FETCH_SETTINGS = {"fetch.wait.max.ms": 50, "fetch.error.backoff.ms": 50}
#: librdkafka's first wait before a connection, in every client's settings. A new client
#: reaches the cluster through its bootstrap address; once the metadata names the broker
#: behind it, librdkafka drops the bootstrap connection, fails the request that was on it,
#: and opens the named broker's connection only when half this backoff has passed. At the
#: default 100 ms, every new client's first request took 54 ms on the embedded broker (a
#: metadata request answered in 1 ms); at 10 ms, 15 ms. Retries still back off
#: exponentially, to ``reconnect.backoff.max.ms`` (10 s by default).
RECONNECT_BACKOFF_MS = 10

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")

#: Faust app settings measured against the embedded Tansu broker (and valid on Apache Kafka).
#: See :meth:`KafkaSettings.faust_app_kwargs` for why each one is there.
FAUST_APP_DEFAULTS: dict[str, Any] = {
    # Tansu answers a JoinGroup only after ~session_timeout/2: Faust's 60 s default costs
    # 30 s per (re)join; 6 s (Kafka's minimum) gives ~3 s. A SIGKILLed member blocks the
    # group until its session expires, so this also bounds the restart pause.
    "broker_session_timeout": 6.0,
    "broker_rebalance_timeout": 6.0,
    "broker_heartbeat_interval": 1.0,
    "consumer_auto_offset_reset": "earliest",
    "stream_wait_empty": False,
    "table_standby_replicas": 0,
    "producer_acks": -1,
    # batch the producer a little: per-event table write + send went 2.5k -> 4.0k msg/s
    "producer_linger": 0.005,
    # bigger fetches and buffers: ~10.6k -> ~14k msg/s through a Faust stream
    "broker_max_poll_records": 5000,
    "stream_buffer_maxsize": 65536,
    "consumer_max_fetch_size": 16 * 1024 * 1024,
    # note: `faust worker` overrides this from its --with-web/--without-web flag
    "web_enabled": False,
    # exactly_once needs transactional producers; Tansu rejects their InitProducerId
    "processing_guarantee": "at_least_once",
}

#: Environment variable -> :class:`KafkaSettings` field.
ENV_FIELDS: dict[str, str] = {
    "KAFKA_BOOTSTRAP_SERVERS": "bootstrap_servers",
    "KAFKA_SECURITY_PROTOCOL": "security_protocol",
    "KAFKA_SASL_MECHANISM": "sasl_mechanism",
    "KAFKA_SASL_USERNAME": "sasl_username",
    "KAFKA_SASL_PASSWORD": "sasl_password",
    "KAFKA_SASL_KERBEROS_SERVICE": "sasl_kerberos_service",
    "KAFKA_SSL_CA_LOCATION": "ssl_ca_location",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl_certificate_location",
    "KAFKA_SSL_KEY_LOCATION": "ssl_key_location",
    "KAFKA_SSL_KEY_PASSWORD": "ssl_key_password",
    "STREAMEVAL_TOPIC_PREFIX": "topic_prefix",
    "STREAMEVAL_PARTITIONS": "partitions",
}

#: KafkaSettings fields that hold secrets (masked wherever settings are shown).
SECRET_FIELDS = frozenset({"sasl_password", "ssl_key_password"})


class ConfigError(ValueError):
    """A Kafka setting that is missing, malformed or inconsistent."""


def _env_name(field_name: str) -> str:
    for env, name in ENV_FIELDS.items():
        if name == field_name:
            return env
    return field_name


@dataclass(frozen=True)
class KafkaSettings:
    """Where Kafka is and how to talk to it.

    Build it with :meth:`from_env` (the normal way) or directly (tests, tools).
    ``bootstrap_servers=None`` means "no cluster configured: use the embedded
    broker"; :func:`streameval.agents.broker.broker_for` then starts one and
    :meth:`with_bootstrap` fills in its address.

    >>> s = KafkaSettings.from_env({"KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"})
    >>> s.confluent_config()["bootstrap.servers"], s.faust_broker_kwargs()["broker"]
    ('k1:9092,k2:9092', 'kafka://k1:9092;kafka://k2:9092')
    """

    bootstrap_servers: str | None = None
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_kerberos_service: str | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    partitions: int = DEFAULT_PARTITIONS

    def __post_init__(self) -> None:
        if self.bootstrap_servers is not None and not self.hosts:
            raise ConfigError("KAFKA_BOOTSTRAP_SERVERS is set but names no host:port")
        if self.security_protocol is not None:
            proto = self.security_protocol.upper()
            if proto not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"KAFKA_SECURITY_PROTOCOL={self.security_protocol!r}: expected one of "
                    f"{', '.join(SECURITY_PROTOCOLS)}"
                )
            object.__setattr__(self, "security_protocol", proto)
        if self.sasl_mechanism is not None:
            mech = self.sasl_mechanism.upper()
            if mech not in SASL_MECHANISMS:
                raise ConfigError(
                    f"KAFKA_SASL_MECHANISM={self.sasl_mechanism!r}: expected one of "
                    f"{', '.join(SASL_MECHANISMS)}"
                )
            object.__setattr__(self, "sasl_mechanism", mech)
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int):
            raise ConfigError(f"STREAMEVAL_PARTITIONS must be an integer, got {self.partitions!r}")
        if self.partitions < 1:
            raise ConfigError(f"STREAMEVAL_PARTITIONS must be >= 1, got {self.partitions}")
        proto = self.effective_protocol
        if proto.startswith("SASL_"):
            mech = self.effective_mechanism
            if mech != "GSSAPI" and not (self.sasl_username and self.sasl_password):
                raise ConfigError(
                    f"security protocol {proto} with SASL mechanism {mech} needs "
                    "KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD"
                )
        if bool(self.ssl_certificate_location) != bool(self.ssl_key_location):
            raise ConfigError(
                "mutual TLS needs both KAFKA_SSL_CERTIFICATE_LOCATION and KAFKA_SSL_KEY_LOCATION"
            )

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KafkaSettings:
        """Read the settings from ``environ`` (default: ``os.environ``).

        Empty values count as unset. Raises :class:`ConfigError` naming the
        variable when a value is malformed.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for var, name in ENV_FIELDS.items():
            raw = env.get(var)
            if raw is None or raw.strip() == "":
                continue
            value: Any = raw if name in SECRET_FIELDS else raw.strip()
            if name == "partitions":
                try:
                    value = int(value)
                except ValueError:
                    raise ConfigError(f"{var} must be an integer, got {raw!r}") from None
            values[name] = value
        if "topic_prefix" not in values and env.get("STREAMEVAL_TOPIC_PREFIX") == "":
            values["topic_prefix"] = ""  # explicitly empty prefix: bare topic names
        return cls(**values)

    def with_bootstrap(self, bootstrap_servers: str) -> KafkaSettings:
        """A copy pointing at ``bootstrap_servers`` (e.g. the embedded broker's address)."""
        return dataclasses.replace(self, bootstrap_servers=bootstrap_servers)

    # -- derived -----------------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        """True when no cluster is configured (the embedded broker will be used)."""
        return self.bootstrap_servers is None

    @property
    def hosts(self) -> list[str]:
        """The bootstrap ``host:port`` entries (without any ``kafka://`` scheme)."""
        if not self.bootstrap_servers:
            return []
        out = []
        for part in self.bootstrap_servers.replace(";", ",").split(","):
            part = part.strip()
            if "://" in part:
                part = part.split("://", 1)[1]
            if part:
                out.append(part.rstrip("/"))
        return out

    @property
    def effective_protocol(self) -> str:
        """The security protocol, inferred from the other settings when not given."""
        if self.security_protocol:
            return self.security_protocol
        tls = bool(self.ssl_ca_location or self.ssl_certificate_location)
        sasl = bool(self.sasl_username or self.sasl_mechanism)
        if sasl:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    @property
    def effective_mechanism(self) -> str:
        """The SASL mechanism (``PLAIN`` unless given)."""
        return self.sasl_mechanism or "PLAIN"

    def _require_bootstrap(self) -> str:
        if not self.bootstrap_servers:
            raise ConfigError(
                "no Kafka bootstrap servers: set KAFKA_BOOTSTRAP_SERVERS, or start the embedded "
                "broker (streameval.agents.broker.broker_for) and use "
                "settings.with_bootstrap(address)"
            )
        return ",".join(self.hosts)

    # -- renderings --------------------------------------------------------------------------

    def confluent_config(self) -> dict[str, Any]:
        """librdkafka settings for confluent-kafka clients (connection and security only).

        Client-specific settings (``group.id``, ``linger.ms``, ...) are added by
        the caller: ``{**settings.confluent_config(), "group.id": "g"}``.
        """
        conf: dict[str, Any] = {
            "bootstrap.servers": self._require_bootstrap(),
            "reconnect.backoff.ms": RECONNECT_BACKOFF_MS,
        }
        proto = self.effective_protocol
        if proto != "PLAINTEXT":
            conf["security.protocol"] = proto
        if proto.startswith("SASL_"):
            mech = self.effective_mechanism
            conf["sasl.mechanism"] = mech
            if mech == "GSSAPI":
                conf["sasl.kerberos.service.name"] = self.sasl_kerberos_service or "kafka"
            else:
                conf["sasl.username"] = self.sasl_username
                conf["sasl.password"] = self.sasl_password
        if proto.endswith("SSL"):
            for key, value in (
                ("ssl.ca.location", self.ssl_ca_location),
                ("ssl.certificate.location", self.ssl_certificate_location),
                ("ssl.key.location", self.ssl_key_location),
                ("ssl.key.password", self.ssl_key_password),
            ):
                if value:
                    conf[key] = value
        return conf

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for Faust/aiokafka, or ``None`` for a plaintext protocol.

        Trusts ``KAFKA_SSL_CA_LOCATION`` (else the system store) and presents the
        client certificate when one is configured. Raises :class:`ConfigError`
        when a file cannot be read.
        """
        if not self.effective_protocol.endswith("SSL"):
            return None
        try:
            ctx = ssl.create_default_context(
                purpose=ssl.Purpose.SERVER_AUTH, cafile=self.ssl_ca_location or None
            )
            if self.ssl_certificate_location:
                ctx.load_cert_chain(
                    self.ssl_certificate_location,
                    self.ssl_key_location,
                    password=self.ssl_key_password,
                )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot build the TLS context: {exc}") from exc
        return ctx

    def faust_app_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for :class:`faust.App`: broker, credentials and tuned settings.

        :data:`FAUST_APP_DEFAULTS` plus ``topic_partitions`` = :attr:`partitions`
        (so the changelog topics Faust creates are co-partitioned with the input
        topics), the broker URL and credentials, then ``overrides``.
        """
        return {
            **FAUST_APP_DEFAULTS,
            "topic_partitions": self.partitions,
            **self.faust_broker_kwargs(),
            **overrides,
        }

    def faust_broker_kwargs(self) -> dict[str, Any]:
        """``broker`` (``kafka://host:port;...``) and, when needed, ``broker_credentials``.

        Credentials are :class:`faust.auth.SASLCredentials` (``PLAIN`` / ``SCRAM``,
        over TLS for ``SASL_SSL``), :class:`faust.auth.GSSAPICredentials` or
        :class:`faust.auth.SSLCredentials` (TLS only); the TLS context comes from
        :meth:`ssl_context`.
        """
        from faust.auth import GSSAPICredentials, SASLCredentials, SSLCredentials

        self._require_bootstrap()
        kwargs: dict[str, Any] = {"broker": ";".join(f"kafka://{h}" for h in self.hosts)}
        proto = self.effective_protocol
        ctx = self.ssl_context()
        if proto == "SSL":
            kwargs["broker_credentials"] = SSLCredentials(ctx)
        elif proto.startswith("SASL_"):
            mech = self.effective_mechanism
            if mech == "GSSAPI":
                kwargs["broker_credentials"] = GSSAPICredentials(
                    kerberos_service_name=self.sasl_kerberos_service or "kafka",
                    ssl_context=ctx,
                    mechanism=mech,
                )
            else:
                kwargs["broker_credentials"] = SASLCredentials(
                    username=self.sasl_username,
                    password=self.sasl_password,
                    ssl_context=ctx,
                    mechanism=mech,
                )
        return kwargs

    def redacted(self) -> dict[str, Any]:
        """Every setting by environment-variable name, secrets masked (safe to log).

        >>> KafkaSettings(sasl_username="u", sasl_password="p").redacted()["KAFKA_SASL_PASSWORD"]
        '***'
        """
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS and value:
                value = SECRET_MASK
            out[_env_name(f.name)] = value
        out["security_protocol (effective)"] = self.effective_protocol
        out["embedded"] = self.embedded
        return out


def redact_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A librdkafka config dict with password-like values masked (safe to log).

    >>> redact_config({"sasl.password": "s3cret", "bootstrap.servers": "k:9092"})
    {'sasl.password': '***', 'bootstrap.servers': 'k:9092'}
    """
    return {
        k: (SECRET_MASK if v and ("password" in k or "secret" in k) else v) for k, v in conf.items()
    }
