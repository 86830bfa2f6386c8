"""Kafka's error codes as exceptions: one KafkaError subclass per `ErrorCode` (Java's `Errors` enum, all but NONE).

Owns each code's class and `kafka_error`; codes and messages are error_codes', the rest of the tree errors'."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aioproducer import errors as _errors
from aioproducer.error_codes import DEFAULT_MESSAGES, ErrorCode
from aioproducer.errors import (
    AuthenticationError,
    InvalidRecordError,
    KafkaError,
    ProtocolError,
    RecordTooLargeError,
    UnsupportedVersionError,
)

__all__ = ["ERROR_CLASSES", "kafka_error"]  # extended below with every class name


_CLASSES: dict[int, type[KafkaError]] = {}


def regular_name(code: ErrorCode) -> str:
    """The class name Kafka's name for `code` gives: UNKNOWN_TOPIC_OR_PARTITION → UnknownTopicOrPartitionError."""
    camel = "".join(part.capitalize() for part in code.name.split("_"))
    return camel if camel.endswith("Error") else camel + "Error"


def _define(
    code: ErrorCode,
    *,
    retriable: bool = False,
    invalid_metadata: bool = False,
    also: type[_errors.AioProducerError] | None = None,
) -> type[KafkaError]:
    """Make the class for one code. `also`: the aioproducer error of the same meaning, so one `except` catches both;
    when it has the code's own name, the code's class takes the prefix `Broker` (see the module's docstring)."""
    name = regular_name(code)
    bases: tuple[type[Exception], ...] = (KafkaError,)
    if also is not None:
        bases = (KafkaError, also)
        if also.__name__ == name:
            name = "Broker" + name
    message = DEFAULT_MESSAGES[code]
    attrs = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"{code.name} ({code.value}): {message}",
        "code": code,
        "retriable": retriable,
        "invalid_metadata": invalid_metadata,
        "default_message": message,
    }
    cls: type[KafkaError] = type(name, bases, attrs)
    return _register(cls)


def _register(cls: type[KafkaError]) -> type[KafkaError]:
    """Make `cls` the class of its code (as is, for the one aioproducer.errors defines: ProducerFencedError)."""
    _CLASSES[cls.code] = cls
    __all__.append(cls.__name__)
    return cls


# Names: Kafka's (NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerError). Three codes meet an aioproducer.errors family of
# that name, and one `except` of the family catches the code's class too:
# - PRODUCER_FENCED: the family means exactly this code (Java's ProducerFencedException is the code's exception, also
#   when the producer finds itself fenced), so `errors.ProducerFencedError` is the code's class itself.
# - INVALID_RECORD, UNSUPPORTED_VERSION: the family is broader (a record refused at the call by aioproducer's own
#   checks; a version negotiation that found no common version) and, unlike a KafkaError, never retried: the broker's
#   answer is its subclass prefixed `Broker` (BrokerInvalidRecordError, BrokerUnsupportedVersionError).
# retriable: the Java exception extends RetriableException. invalid_metadata: it extends InvalidMetadataException,
# so Java's Sender requests a metadata update before retrying (UnknownLeaderEpochException does not).
UnknownServerError = _define(ErrorCode.UNKNOWN_SERVER_ERROR)
OffsetOutOfRangeError = _define(ErrorCode.OFFSET_OUT_OF_RANGE)
CorruptMessageError = _define(ErrorCode.CORRUPT_MESSAGE, retriable=True)
UnknownTopicOrPartitionError = _define(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, retriable=True, invalid_metadata=True)
InvalidFetchSizeError = _define(ErrorCode.INVALID_FETCH_SIZE)
LeaderNotAvailableError = _define(ErrorCode.LEADER_NOT_AVAILABLE, retriable=True, invalid_metadata=True)
NotLeaderOrFollowerError = _define(ErrorCode.NOT_LEADER_OR_FOLLOWER, retriable=True, invalid_metadata=True)
RequestTimedOutError = _define(ErrorCode.REQUEST_TIMED_OUT, retriable=True)
BrokerNotAvailableError = _define(ErrorCode.BROKER_NOT_AVAILABLE)
ReplicaNotAvailableError = _define(ErrorCode.REPLICA_NOT_AVAILABLE, retriable=True, invalid_metadata=True)
MessageTooLargeError = _define(ErrorCode.MESSAGE_TOO_LARGE, also=RecordTooLargeError)
StaleControllerEpochError = _define(ErrorCode.STALE_CONTROLLER_EPOCH)
OffsetMetadataTooLargeError = _define(ErrorCode.OFFSET_METADATA_TOO_LARGE)
NetworkExceptionError = _define(ErrorCode.NETWORK_EXCEPTION, retriable=True, invalid_metadata=True)
CoordinatorLoadInProgressError = _define(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, retriable=True)
CoordinatorNotAvailableError = _define(ErrorCode.COORDINATOR_NOT_AVAILABLE, retriable=True)
NotCoordinatorError = _define(ErrorCode.NOT_COORDINATOR, retriable=True)
InvalidTopicExceptionError = _define(ErrorCode.INVALID_TOPIC_EXCEPTION)
RecordListTooLargeError = _define(ErrorCode.RECORD_LIST_TOO_LARGE)
NotEnoughReplicasError = _define(ErrorCode.NOT_ENOUGH_REPLICAS, retriable=True)
NotEnoughReplicasAfterAppendError = _define(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, retriable=True)
InvalidRequiredAcksError = _define(ErrorCode.INVALID_REQUIRED_ACKS)
IllegalGenerationError = _define(ErrorCode.ILLEGAL_GENERATION)
InconsistentGroupProtocolError = _define(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
InvalidGroupIdError = _define(ErrorCode.INVALID_GROUP_ID)
UnknownMemberIdError = _define(ErrorCode.UNKNOWN_MEMBER_ID)
InvalidSessionTimeoutError = _define(ErrorCode.INVALID_SESSION_TIMEOUT)
RebalanceInProgressError = _define(ErrorCode.REBALANCE_IN_PROGRESS)
InvalidCommitOffsetSizeError = _define(ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
TopicAuthorizationFailedError = _define(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GroupAuthorizationFailedError = _define(ErrorCode.GROUP_AUTHORIZATION_FAILED)
ClusterAuthorizationFailedError = _define(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
InvalidTimestampError = _define(ErrorCode.INVALID_TIMESTAMP)
UnsupportedSaslMechanismError = _define(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
IllegalSaslStateError = _define(ErrorCode.ILLEGAL_SASL_STATE)
BrokerUnsupportedVersionError = _define(ErrorCode.UNSUPPORTED_VERSION, also=UnsupportedVersionError)
TopicAlreadyExistsError = _define(ErrorCode.TOPIC_ALREADY_EXISTS)
InvalidPartitionsError = _define(ErrorCode.INVALID_PARTITIONS)
InvalidReplicationFactorError = _define(ErrorCode.INVALID_REPLICATION_FACTOR)
InvalidReplicaAssignmentError = _define(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
InvalidConfigError = _define(ErrorCode.INVALID_CONFIG)
NotControllerError = _define(ErrorCode.NOT_CONTROLLER, retriable=True)
InvalidRequestError = _define(ErrorCode.INVALID_REQUEST)
UnsupportedForMessageFormatError = _define(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
PolicyViolationError = _define(ErrorCode.POLICY_VIOLATION)
OutOfOrderSequenceNumberError = _define(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
DuplicateSequenceNumberError = _define(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
InvalidProducerEpochError = _define(ErrorCode.INVALID_PRODUCER_EPOCH)
InvalidTxnStateError = _define(ErrorCode.INVALID_TXN_STATE)
InvalidProducerIdMappingError = _define(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
InvalidTransactionTimeoutError = _define(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
ConcurrentTransactionsError = _define(ErrorCode.CONCURRENT_TRANSACTIONS, retriable=True)
TransactionCoordinatorFencedError = _define(ErrorCode.TRANSACTION_COORDINATOR_FENCED)
TransactionalIdAuthorizationFailedError = _define(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
SecurityDisabledError = _define(ErrorCode.SECURITY_DISABLED)
OperationNotAttemptedError = _define(ErrorCode.OPERATION_NOT_ATTEMPTED)
KafkaStorageError = _define(ErrorCode.KAFKA_STORAGE_ERROR, retriable=True, invalid_metadata=True)
LogDirNotFoundError = _define(ErrorCode.LOG_DIR_NOT_FOUND)
SaslAuthenticationFailedError = _define(ErrorCode.SASL_AUTHENTICATION_FAILED, also=AuthenticationError)
UnknownProducerIdError = _define(ErrorCode.UNKNOWN_PRODUCER_ID)
ReassignmentInProgressError = _define(ErrorCode.REASSIGNMENT_IN_PROGRESS)
DelegationTokenAuthDisabledError = _define(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
DelegationTokenNotFoundError = _define(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
DelegationTokenOwnerMismatchError = _define(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
DelegationTokenRequestNotAllowedError = _define(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
DelegationTokenAuthorizationFailedError = _define(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
DelegationTokenExpiredError = _define(ErrorCode.DELEGATION_TOKEN_EXPIRED)
InvalidPrincipalTypeError = _define(ErrorCode.INVALID_PRINCIPAL_TYPE)
NonEmptyGroupError = _define(ErrorCode.NON_EMPTY_GROUP)
GroupIdNotFoundError = _define(ErrorCode.GROUP_ID_NOT_FOUND)
FetchSessionIdNotFoundError = _define(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, retriable=True)
InvalidFetchSessionEpochError = _define(ErrorCode.INVALID_FETCH_SESSION_EPOCH, retriable=True)
ListenerNotFoundError = _define(ErrorCode.LISTENER_NOT_FOUND, retriable=True, invalid_metadata=True)
TopicDeletionDisabledError = _define(ErrorCode.TOPIC_DELETION_DISABLED)
FencedLeaderEpochError = _define(ErrorCode.FENCED_LEADER_EPOCH, retriable=True, invalid_metadata=True)
UnknownLeaderEpochError = _define(ErrorCode.UNKNOWN_LEADER_EPOCH, retriable=True)
UnsupportedCompressionTypeError = _define(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
StaleBrokerEpochError = _define(ErrorCode.STALE_BROKER_EPOCH)
OffsetNotAvailableError = _define(ErrorCode.OFFSET_NOT_AVAILABLE, retriable=True)
MemberIdRequiredError = _define(ErrorCode.MEMBER_ID_REQUIRED)
PreferredLeaderNotAvailableError = _define(
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, retriable=True, invalid_metadata=True
)
GroupMaxSizeReachedError = _define(ErrorCode.GROUP_MAX_SIZE_REACHED)
FencedInstanceIdError = _define(ErrorCode.FENCED_INSTANCE_ID)
EligibleLeadersNotAvailableError = _define(
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, retriable=True, invalid_metadata=True
)
ElectionNotNeededError = _define(ErrorCode.ELECTION_NOT_NEEDED, retriable=True, invalid_metadata=True)
NoReassignmentInProgressError = _define(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
GroupSubscribedToTopicError = _define(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
BrokerInvalidRecordError = _define(ErrorCode.INVALID_RECORD, also=InvalidRecordError)
UnstableOffsetCommitError = _define(ErrorCode.UNSTABLE_OFFSET_COMMIT, retriable=True)
ThrottlingQuotaExceededError = _define(ErrorCode.THROTTLING_QUOTA_EXCEEDED, retriable=True)
ProducerFencedError = _register(_errors.ProducerFencedError)  # one class: see the module's docstring
ResourceNotFoundError = _define(ErrorCode.RESOURCE_NOT_FOUND)
DuplicateResourceError = _define(ErrorCode.DUPLICATE_RESOURCE)
UnacceptableCredentialError = _define(ErrorCode.UNACCEPTABLE_CREDENTIAL)
InconsistentVoterSetError = _define(ErrorCode.INCONSISTENT_VOTER_SET)
InvalidUpdateVersionError = _define(ErrorCode.INVALID_UPDATE_VERSION)
FeatureUpdateFailedError = _define(ErrorCode.FEATURE_UPDATE_FAILED)
PrincipalDeserializationFailureError = _define(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
SnapshotNotFoundError = _define(ErrorCode.SNAPSHOT_NOT_FOUND)
PositionOutOfRangeError = _define(ErrorCode.POSITION_OUT_OF_RANGE)
UnknownTopicIdError = _define(ErrorCode.UNKNOWN_TOPIC_ID, retriable=True, invalid_metadata=True)
DuplicateBrokerRegistrationError = _define(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
BrokerIdNotRegisteredError = _define(ErrorCode.BROKER_ID_NOT_REGISTERED)
InconsistentTopicIdError = _define(ErrorCode.INCONSISTENT_TOPIC_ID, retriable=True, invalid_metadata=True)
InconsistentClusterIdError = _define(ErrorCode.INCONSISTENT_CLUSTER_ID)
TransactionalIdNotFoundError = _define(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
FetchSessionTopicIdError = _define(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, retriable=True)
IneligibleReplicaError = _define(ErrorCode.INELIGIBLE_REPLICA)
NewLeaderElectedError = _define(ErrorCode.NEW_LEADER_ELECTED)
OffsetMovedToTieredStorageError = _define(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE)
FencedMemberEpochError = _define(ErrorCode.FENCED_MEMBER_EPOCH)
UnreleasedInstanceIdError = _define(ErrorCode.UNRELEASED_INSTANCE_ID)
UnsupportedAssignorError = _define(ErrorCode.UNSUPPORTED_ASSIGNOR)
StaleMemberEpochError = _define(ErrorCode.STALE_MEMBER_EPOCH)
MismatchedEndpointTypeError = _define(ErrorCode.MISMATCHED_ENDPOINT_TYPE)
UnsupportedEndpointTypeError = _define(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
UnknownControllerIdError = _define(ErrorCode.UNKNOWN_CONTROLLER_ID)
UnknownSubscriptionIdError = _define(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
TelemetryTooLargeError = _define(ErrorCode.TELEMETRY_TOO_LARGE)
InvalidRegistrationError = _define(ErrorCode.INVALID_REGISTRATION)
TransactionAbortableError = _define(ErrorCode.TRANSACTION_ABORTABLE)
InvalidRecordStateError = _define(ErrorCode.INVALID_RECORD_STATE)
ShareSessionNotFoundError = _define(ErrorCode.SHARE_SESSION_NOT_FOUND, retriable=True)
InvalidShareSessionEpochError = _define(ErrorCode.INVALID_SHARE_SESSION_EPOCH, retriable=True)
FencedStateEpochError = _define(ErrorCode.FENCED_STATE_EPOCH)
InvalidVoterKeyError = _define(ErrorCode.INVALID_VOTER_KEY)
DuplicateVoterError = _define(ErrorCode.DUPLICATE_VOTER)
VoterNotFoundError = _define(ErrorCode.VOTER_NOT_FOUND)
InvalidRegularExpressionError = _define(ErrorCode.INVALID_REGULAR_EXPRESSION)
RebootstrapRequiredError = _define(ErrorCode.REBOOTSTRAP_REQUIRED)
StreamsInvalidTopologyError = _define(ErrorCode.STREAMS_INVALID_TOPOLOGY)
StreamsInvalidTopologyEpochError = _define(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH)
StreamsTopologyFencedError = _define(ErrorCode.STREAMS_TOPOLOGY_FENCED)
ShareSessionLimitReachedError = _define(ErrorCode.SHARE_SESSION_LIMIT_REACHED, retriable=True)
GroupDeletionFailedError = _define(ErrorCode.GROUP_DELETION_FAILED)
StreamsTopologyDescriptionUpdateFailedError = _define(ErrorCode.STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED)
ControllerIdNotRegisteredError = _define(ErrorCode.CONTROLLER_ID_NOT_REGISTERED)


ERROR_CLASSES: Mapping[int, type[KafkaError]] = MappingProxyType(_CLASSES)


def kafka_error(code: int, message: str | None = None) -> KafkaError:
    """The exception for a broker error code, with `message` (or the code's default message).

    An unknown code (from a newer broker) becomes an UnknownServerError, like Java's Errors.forCode, whose
    message and `code` attribute still carry the code received. Code 0 means success and raises ProtocolError.
    """
    cls = _CLASSES.get(code)
    if cls is not None:
        return cls(message)
    if code == ErrorCode.NONE:
        raise ProtocolError("error code 0 (NONE) means success; there is no exception for it")
    detail = f": {message}" if message else ""
    error = UnknownServerError(f"unknown Kafka error code {code}{detail}")
    error.code = code
    return error
