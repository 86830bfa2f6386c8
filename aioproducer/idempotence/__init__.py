"""Who the producer is to the brokers and the idempotent producer's sequence rules (KIP-98, KIP-360,
KIP-890): the producer id and epoch (`identity`), shared by the sequence rules (`sequences`, R1-R10) and the
transaction state machine; pure. Internal: no stable API.
"""
