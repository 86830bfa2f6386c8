"""Who the producer is to the brokers: its producer id and epoch, and whether the next identity must be a bump; pure.

One object, shared by the sequence rules (`idempotence.IdempotenceState`) and the transaction state machine
(`transactions.state.TransactionState`): each of these facts has its home here, and neither module keeps a copy to
be reconciled with the other's (Java keeps them in TransactionManager's `producerIdAndEpoch` and
`epochBumpRequired`, which the sender and the transaction handlers both read). Whether the producer may go on (an
abortable or fatal error) is the transaction state machine's alone; whether a batch's answer needs a new identity
is the sequence rules'.
"""

from __future__ import annotations

import logging

__all__ = ["NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "ProducerIdentity"]

log = logging.getLogger("aioproducer.idempotence")

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerIdentity:
    """The producer id and epoch new batches are stamped with, and what must happen before the next one.

    `needs_producer_id`: no identity may be used until InitProducerId answers (at start; for an idempotent producer
    also when its epoch ran out or a broker refused a locally bumped one, idempotence.R1/R9).
    `epoch_bump_required`: the next identity must be the current one with a bumped epoch (KIP-360): set when a
    sequence stream broke (idempotence.R9, R10), when an abortable error hit a transaction under version 1 with a
    coordinator that can bump, when the coordinator refused an abort, and when the transaction version switches to
    2; cleared when a new identity is adopted (InitProducerId, or EndTxn v5 under transaction version 2).
    """

    __slots__ = ("epoch_bump_required", "needs_producer_id", "producer_epoch", "producer_id")

    def __init__(self, *, needs_producer_id: bool = True) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.needs_producer_id = needs_producer_id
        self.epoch_bump_required = False

    def __repr__(self) -> str:
        flags = "".join(f" {name}" for name in ("needs_producer_id", "epoch_bump_required") if getattr(self, name))
        return f"<ProducerIdentity id={self.producer_id} epoch={self.producer_epoch}{flags}>"

    @property
    def known(self) -> bool:
        """Whether a producer id was granted (it may still be about to change)."""
        return self.producer_id != NO_PRODUCER_ID

    def adopt(self, producer_id: int, producer_epoch: int) -> None:
        """A new identity from InitProducerId or EndTxn v5: nothing more is waited for."""
        if (producer_id, producer_epoch) != (self.producer_id, self.producer_epoch):
            log.info("producer id %d, epoch %d", producer_id, producer_epoch)
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.needs_producer_id = False
        self.epoch_bump_required = False

    def require_epoch_bump(self) -> None:
        """The next identity must be a bumped epoch of this one (KIP-360)."""
        self.epoch_bump_required = True
