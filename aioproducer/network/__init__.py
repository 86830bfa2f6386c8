"""Brokers: one connection each (TLS, SASL, framing, correlation ids), the cluster's metadata and when to
refresh it, reconnect backoff. Internal: no stable API.
"""
