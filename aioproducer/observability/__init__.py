"""What the producer tells the outside: metrics under Java's names, `health()`, the observer that turns events
into metrics, hook calls and logs, and the record hooks. Internal: `aioproducer.metrics` and `aioproducer.health`
re-export the public types.
"""
