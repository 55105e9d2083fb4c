"""``SaslListener``: how a SASL_PLAINTEXT or SASL_SSL listener authenticates its clients.

The broker builds one per SASL listener at start-up from the listener's view of the
config (``BrokerConfig.listener_view``: ``listener.name.<l>.`` values over the broker's
own): its ``SaslListenerConfig`` (mechanisms, PLAIN users from the JAAS line, session
lifetime), the broker's ``ScramCredentials`` (one store for every listener, updated by
the admin APIs or ZooKeeper), the broker's clock, and the timer on which failed logins
wait (``_delayed_close``). Each connection accepted on the listener gets its own
``SaslServerAuthenticator`` from ``new_authenticator``.

Concurrency: built and used on the broker's event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tickwheel.security import (
    PLAIN,
    SCRAM_MECHANISMS,
    PlainServer,
    SaslListenerConfig,
    SaslServer,
    SaslServerAuthenticator,
    ScramCredentials,
    ScramServer,
    Session,
)
from tickwheel.timer import Clock, SystemTimer

DELAYED_CLOSE_TIMER = "DelayedCloseSocket"
"""The name of the broker's timer for failed logins' delayed closes."""


class SaslListener:
    """One SASL listener's settings and what its connections authenticate against."""

    def __init__(
        self,
        config: SaslListenerConfig,
        credentials: ScramCredentials,
        clock: Clock,
        close_timer: SystemTimer,
        failed_authentication_delay_ms: int,
        max_receive_bytes: int,
    ) -> None:
        self.config = config
        # sasl.server.max.receive.size: the largest frame before authentication.
        self.max_receive_bytes = max_receive_bytes
        self.close_timer = close_timer
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self._clock = clock
        factories: dict[str, Callable[[], SaslServer]] = {}
        for mechanism in config.mechanisms:
            if mechanism == PLAIN:
                factories[mechanism] = functools.partial(PlainServer, config.plain_users)
            else:
                factories[mechanism] = functools.partial(
                    ScramServer, SCRAM_MECHANISMS[mechanism], credentials.lookup
                )
        self._factories = factories

    def new_authenticator(self, session: Session) -> SaslServerAuthenticator:
        """The SASL state of a new connection whose session is ``session``."""
        return SaslServerAuthenticator(
            session,
            self._factories,
            max_reauth_ms=self.config.max_reauth_ms,
            now_ms=self._clock.now_ms,
        )
