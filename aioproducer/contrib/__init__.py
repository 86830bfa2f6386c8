"""Integrations with other projects' libraries, each imported on its own (`aioproducer.contrib.prometheus`,
`aioproducer.contrib.opentelemetry`) so the core never needs them."""
