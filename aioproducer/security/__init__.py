"""TLS and SASL for broker connections: settings rules, the client SSL context, SASL mechanisms and the exchange.

Knows nothing of the producer pipeline; `connection.py` drives it. Holds re-exports for users only.
"""

from __future__ import annotations

from aioproducer.security.sasl import OAuthBearerToken, TokenProvider
from aioproducer.security.settings import SASL_MECHANISMS
from aioproducer.security.tls import build_ssl_context

__all__ = ["SASL_MECHANISMS", "OAuthBearerToken", "TokenProvider", "build_ssl_context"]
