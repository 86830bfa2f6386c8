"""aioproducer's version, in one place: `aioproducer.__version__` re-exports it, and connections announce it to
brokers (KIP-511's client_software_version) from here, without importing the package's public API."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
