"""Kafka's error codes as exceptions: one KafkaError subclass per code of Java's `Errors` enum (all but NONE = 0).

Owns the code table and `kafka_error`. The base class and the rest of the error tree live in aioproducer.errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aioproducer import errors as _errors
from aioproducer.errors import KafkaError, ProtocolError

__all__ = ["ERROR_CLASSES", "kafka_error"]  # extended below with every class name

# Default messages, verbatim from Java's Errors enum (clients/.../common/protocol/Errors.java) of the newest release
# (Kafka rewords some between releases; tests/test_kafka_errors.py compares them with the default judge's).
_MESSAGES: dict[int, str] = {
    -1: "The server experienced an unexpected error when processing the request.",
    1: "The requested offset is not within the range of offsets maintained by the server.",
    2: (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic,"
        " or is otherwise corrupt."
    ),
    3: "This server does not host this topic-partition.",
    4: "The requested fetch size is invalid.",
    5: "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    6: (
        "For requests intended only for the leader, this error indicates that the broker is not the current "
        "leader. For requests intended for any replica, this error indicates that the broker is not a replica of"
        " the topic partition."
    ),
    7: "The request timed out.",
    8: "The broker is not available.",
    9: (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and other "
        "requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a "
        "replica of the topic-partition."
    ),
    10: "The request included a message larger than the max message size the server will accept.",
    11: "The controller moved to another broker.",
    12: "The metadata field of the offset request was too large.",
    13: "The server disconnected before a response was received.",
    14: "The coordinator is loading and hence can't process requests.",
    15: "The coordinator is not available.",
    16: "This is not the correct coordinator.",
    17: "The request attempted to perform an operation on an invalid topic.",
    18: "The request included message batch larger than the configured segment size on the server.",
    19: "Messages are rejected since there are fewer in-sync replicas than required.",
    20: "Messages are written to the log, but to fewer in-sync replicas than required.",
    21: "Produce request specified an invalid value for required acks.",
    22: "Specified group generation id is not valid.",
    23: (
        "The group member's supported protocols are incompatible with those of existing members or first group "
        "member tried to join with empty protocol type or empty protocol list."
    ),
    24: "The group id is invalid.",
    25: "The coordinator is not aware of this member.",
    26: (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    ),
    27: "The group is rebalancing, so a rejoin is needed.",
    28: "The committing offset data size is not valid.",
    29: "Topic authorization failed.",
    30: "Group authorization failed.",
    31: "Cluster authorization failed.",
    32: "The timestamp of the message is out of acceptable range.",
    33: "The broker does not support the requested SASL mechanism.",
    34: "Request is not valid given the current SASL state.",
    35: "The version of API is not supported.",
    36: "Topic with this name already exists.",
    37: "Number of partitions is below 1.",
    38: "Replication factor is below 1 or larger than the number of available brokers.",
    39: "Replica assignment is invalid.",
    40: "Configuration is invalid.",
    41: "This is not the correct controller for this cluster.",
    42: (
        "This most likely occurs because of a request being malformed by the client library or the message was "
        "sent to an incompatible broker. See the broker logs for more details."
    ),
    43: "The message format version on the broker does not support the request.",
    44: "Request parameters do not satisfy the configured policy.",
    45: "The broker received an out of order sequence number.",
    46: "The broker received a duplicate sequence number.",
    47: "Producer attempted to produce with an old epoch.",
    48: "The producer attempted a transactional operation in an invalid state.",
    49: "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    50: (
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by "
        "transaction.max.timeout.ms)."
    ),
    51: (
        "The producer attempted to update a transaction while another concurrent operation on the same "
        "transaction was ongoing."
    ),
    52: (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current "
        "coordinator for a given producer."
    ),
    53: "Transactional Id authorization failed.",
    54: "Security features are disabled.",
    55: (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where some "
        "operations in the batch failed, causing the broker to respond without trying the rest."
    ),
    56: "Disk error when trying to access log file on the disk.",
    57: "The user-specified log directory is not found in the broker config.",
    58: "SASL Authentication failed.",
    59: (
        "This exception is raised by the broker if it could not locate the producer metadata associated with "
        "the producerId in question. This could happen if, for instance, the producer's records were deleted "
        "because their retention time had elapsed. Once the last records of the producerId are removed, the "
        "producer's metadata is removed from the broker, and future appends by the producer will return this "
        "exception."
    ),
    60: "A partition reassignment is in progress.",
    61: "Delegation Token feature is not enabled.",
    62: "Delegation Token is not found on server.",
    63: "Specified Principal is not valid Owner/Renewer.",
    64: (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token "
        "authenticated channels."
    ),
    65: "Delegation Token authorization failed.",
    66: "Delegation Token is expired.",
    67: "Supplied principalType is not supported.",
    68: "The group is not empty.",
    69: "The group id does not exist.",
    70: "The fetch session ID was not found.",
    71: "The fetch session epoch is invalid.",
    72: (
        "There is no listener on the leader broker that matches the listener on which metadata request was processed."
    ),
    73: "Topic deletion is disabled.",
    74: "The leader epoch in the request is older than the epoch on the broker.",
    75: "The leader epoch in the request is newer than the epoch on the broker.",
    76: "The requesting client does not support the compression type of given partition.",
    77: "Broker epoch has changed.",
    78: (
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be "
        "guaranteed to be monotonically increasing."
    ),
    79: "The group member needs to have a valid member id before actually entering a consumer group.",
    80: "The preferred leader was not available.",
    81: "The group has reached its maximum size.",
    82: (
        "The broker rejected this static consumer since another consumer with the same group.instance.id has "
        "registered with a different member.id."
    ),
    83: "Eligible topic partition leaders are not available.",
    84: "Leader election not needed for topic partition.",
    85: "No partition reassignment is in progress.",
    86: "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    87: "This record has failed the validation on broker and hence will be rejected.",
    88: "There are unstable offsets that need to be cleared.",
    89: "The throttling quota has been exceeded.",
    90: "There is a newer producer with the same transactionalId which fences the current one.",
    91: "A request illegally referred to a resource that does not exist.",
    92: "A request illegally referred to the same resource twice.",
    93: "Requested credential would not meet criteria for acceptability.",
    94: (
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."
    ),
    95: "The given update version was invalid.",
    96: "Unable to update finalized features due to an unexpected server error.",
    97: (
        "Request principal deserialization failed during forwarding. This indicates an internal error on the "
        "broker cluster security setup."
    ),
    98: "Requested snapshot was not found.",
    99: "Requested position is not greater than or equal to zero, and less than the size of the snapshot.",
    100: "This server does not host this topic ID.",
    101: "This broker ID is already in use.",
    102: "The given broker ID was not registered.",
    103: "The log's topic ID did not match the topic ID in the request.",
    104: "The clusterId in the request does not match that found on the server.",
    105: "The transactionalId could not be found.",
    106: "The fetch session encountered inconsistent topic ID usage.",
    107: "The new ISR contains at least one ineligible replica.",
    108: "The AlterPartition request successfully updated the partition state but the leader has changed.",
    109: "The requested offset is moved to tiered storage.",
    110: (
        "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."
    ),
    111: "The instance ID is still used by another member in the consumer group. That member must leave first.",
    112: "The assignor or its version range is not supported by the consumer group.",
    113: (
        "The member epoch is stale. The member must retry after receiving its updated member epoch via the "
        "ConsumerGroupHeartbeat API."
    ),
    114: "The request was sent to an endpoint of the wrong type.",
    115: "This endpoint type is not supported yet.",
    116: "This controller ID is not known.",
    117: "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    118: "Client sent a push telemetry request larger than the maximum size the broker will accept.",
    119: "The controller has considered the broker registration to be invalid.",
    120: (
        "The server encountered an error with the transaction. The client can abort the transaction to "
        "continue using this transactional ID."
    ),
    121: "The record state is invalid. The acknowledgement of delivery could not be completed.",
    122: "The share session was not found.",
    123: "The share session epoch is invalid.",
    124: "The coordinator rejected the request because the state epoch did not match.",
    125: "The voter key doesn't match the receiving replica's key.",
    126: "The voter is already part of the set of voters.",
    127: "The voter is not part of the set of voters.",
    128: "The regular expression is not valid.",
    # Added in Kafka 4.0-4.1.
    129: "Client metadata is stale. The client should rebootstrap to obtain new metadata.",
    130: "The supplied topology is invalid.",
    131: "The supplied topology epoch is invalid.",
    132: "The supplied topology epoch is outdated.",
    133: "The limit of share sessions has been reached.",
    # Added in Kafka 4.2-4.4.
    134: "DeleteGroups could not complete; see the error message on the per-group result for details.",
    135: "The broker could not process the topology description update; see the error message for details.",
    136: "The given controller ID was not registered.",
}


_CLASSES: dict[int, type[KafkaError]] = {}


def _class_name(kafka_name: str) -> str:
    camel = "".join(part.capitalize() for part in kafka_name.split("_"))
    return camel if camel.endswith("Error") else camel + "Error"


def _define(
    code: int,
    kafka_name: str,
    *,
    retriable: bool = False,
    invalid_metadata: bool = False,
    also: type[_errors.AioProducerError] | None = None,
) -> type[KafkaError]:
    """Make the class for one code. `also`: the aioproducer error of the same meaning, so one `except` catches both."""
    name = _class_name(kafka_name)
    bases: tuple[type[Exception], ...] = (KafkaError,) if also is None else (KafkaError, also)
    attrs = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": f"{kafka_name} ({code}): {_MESSAGES[code]}",
        "code": code,
        "retriable": retriable,
        "invalid_metadata": invalid_metadata,
        "default_message": _MESSAGES[code],
    }
    cls: type[KafkaError] = type(name, bases, attrs)
    _CLASSES[code] = cls
    __all__.append(name)
    return cls


# retriable: the Java exception extends RetriableException. invalid_metadata: it extends InvalidMetadataException,
# so Java's Sender requests a metadata update before retrying (UnknownLeaderEpochException does not).
UnknownServerError = _define(-1, "UNKNOWN_SERVER_ERROR")
OffsetOutOfRangeError = _define(1, "OFFSET_OUT_OF_RANGE")
CorruptMessageError = _define(2, "CORRUPT_MESSAGE", retriable=True)
UnknownTopicOrPartitionError = _define(3, "UNKNOWN_TOPIC_OR_PARTITION", retriable=True, invalid_metadata=True)
InvalidFetchSizeError = _define(4, "INVALID_FETCH_SIZE")
LeaderNotAvailableError = _define(5, "LEADER_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
NotLeaderOrFollowerError = _define(6, "NOT_LEADER_OR_FOLLOWER", retriable=True, invalid_metadata=True)
RequestTimedOutError = _define(7, "REQUEST_TIMED_OUT", retriable=True)
BrokerNotAvailableError = _define(8, "BROKER_NOT_AVAILABLE")
ReplicaNotAvailableError = _define(9, "REPLICA_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
MessageTooLargeError = _define(10, "MESSAGE_TOO_LARGE", also=_errors.RecordTooLargeError)
StaleControllerEpochError = _define(11, "STALE_CONTROLLER_EPOCH")
OffsetMetadataTooLargeError = _define(12, "OFFSET_METADATA_TOO_LARGE")
NetworkExceptionError = _define(13, "NETWORK_EXCEPTION", retriable=True, invalid_metadata=True)
CoordinatorLoadInProgressError = _define(14, "COORDINATOR_LOAD_IN_PROGRESS", retriable=True)
CoordinatorNotAvailableError = _define(15, "COORDINATOR_NOT_AVAILABLE", retriable=True)
NotCoordinatorError = _define(16, "NOT_COORDINATOR", retriable=True)
InvalidTopicExceptionError = _define(17, "INVALID_TOPIC_EXCEPTION")
RecordListTooLargeError = _define(18, "RECORD_LIST_TOO_LARGE")
NotEnoughReplicasError = _define(19, "NOT_ENOUGH_REPLICAS", retriable=True)
NotEnoughReplicasAfterAppendError = _define(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
InvalidRequiredAcksError = _define(21, "INVALID_REQUIRED_ACKS")
IllegalGenerationError = _define(22, "ILLEGAL_GENERATION")
InconsistentGroupProtocolError = _define(23, "INCONSISTENT_GROUP_PROTOCOL")
InvalidGroupIdError = _define(24, "INVALID_GROUP_ID")
UnknownMemberIdError = _define(25, "UNKNOWN_MEMBER_ID")
InvalidSessionTimeoutError = _define(26, "INVALID_SESSION_TIMEOUT")
RebalanceInProgressError = _define(27, "REBALANCE_IN_PROGRESS")
InvalidCommitOffsetSizeError = _define(28, "INVALID_COMMIT_OFFSET_SIZE")
TopicAuthorizationFailedError = _define(29, "TOPIC_AUTHORIZATION_FAILED")
GroupAuthorizationFailedError = _define(30, "GROUP_AUTHORIZATION_FAILED")
ClusterAuthorizationFailedError = _define(31, "CLUSTER_AUTHORIZATION_FAILED")
InvalidTimestampError = _define(32, "INVALID_TIMESTAMP")
UnsupportedSaslMechanismError = _define(33, "UNSUPPORTED_SASL_MECHANISM")
IllegalSaslStateError = _define(34, "ILLEGAL_SASL_STATE")
UnsupportedVersionError = _define(35, "UNSUPPORTED_VERSION", also=_errors.UnsupportedVersionError)
TopicAlreadyExistsError = _define(36, "TOPIC_ALREADY_EXISTS")
InvalidPartitionsError = _define(37, "INVALID_PARTITIONS")
InvalidReplicationFactorError = _define(38, "INVALID_REPLICATION_FACTOR")
InvalidReplicaAssignmentError = _define(39, "INVALID_REPLICA_ASSIGNMENT")
InvalidConfigError = _define(40, "INVALID_CONFIG")
NotControllerError = _define(41, "NOT_CONTROLLER", retriable=True)
InvalidRequestError = _define(42, "INVALID_REQUEST")
UnsupportedForMessageFormatError = _define(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
PolicyViolationError = _define(44, "POLICY_VIOLATION")
OutOfOrderSequenceNumberError = _define(45, "OUT_OF_ORDER_SEQUENCE_NUMBER")
DuplicateSequenceNumberError = _define(46, "DUPLICATE_SEQUENCE_NUMBER")
InvalidProducerEpochError = _define(47, "INVALID_PRODUCER_EPOCH")
InvalidTxnStateError = _define(48, "INVALID_TXN_STATE")
InvalidProducerIdMappingError = _define(49, "INVALID_PRODUCER_ID_MAPPING")
InvalidTransactionTimeoutError = _define(50, "INVALID_TRANSACTION_TIMEOUT")
ConcurrentTransactionsError = _define(51, "CONCURRENT_TRANSACTIONS", retriable=True)
TransactionCoordinatorFencedError = _define(52, "TRANSACTION_COORDINATOR_FENCED")
TransactionalIdAuthorizationFailedError = _define(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
SecurityDisabledError = _define(54, "SECURITY_DISABLED")
OperationNotAttemptedError = _define(55, "OPERATION_NOT_ATTEMPTED")
KafkaStorageError = _define(56, "KAFKA_STORAGE_ERROR", retriable=True, invalid_metadata=True)
LogDirNotFoundError = _define(57, "LOG_DIR_NOT_FOUND")
SaslAuthenticationFailedError = _define(58, "SASL_AUTHENTICATION_FAILED", also=_errors.AuthenticationError)
UnknownProducerIdError = _define(59, "UNKNOWN_PRODUCER_ID")
ReassignmentInProgressError = _define(60, "REASSIGNMENT_IN_PROGRESS")
DelegationTokenAuthDisabledError = _define(61, "DELEGATION_TOKEN_AUTH_DISABLED")
DelegationTokenNotFoundError = _define(62, "DELEGATION_TOKEN_NOT_FOUND")
DelegationTokenOwnerMismatchError = _define(63, "DELEGATION_TOKEN_OWNER_MISMATCH")
DelegationTokenRequestNotAllowedError = _define(64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
DelegationTokenAuthorizationFailedError = _define(65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED")
DelegationTokenExpiredError = _define(66, "DELEGATION_TOKEN_EXPIRED")
InvalidPrincipalTypeError = _define(67, "INVALID_PRINCIPAL_TYPE")
NonEmptyGroupError = _define(68, "NON_EMPTY_GROUP")
GroupIdNotFoundError = _define(69, "GROUP_ID_NOT_FOUND")
FetchSessionIdNotFoundError = _define(70, "FETCH_SESSION_ID_NOT_FOUND", retriable=True)
InvalidFetchSessionEpochError = _define(71, "INVALID_FETCH_SESSION_EPOCH", retriable=True)
ListenerNotFoundError = _define(72, "LISTENER_NOT_FOUND", retriable=True, invalid_metadata=True)
TopicDeletionDisabledError = _define(73, "TOPIC_DELETION_DISABLED")
FencedLeaderEpochError = _define(74, "FENCED_LEADER_EPOCH", retriable=True, invalid_metadata=True)
UnknownLeaderEpochError = _define(75, "UNKNOWN_LEADER_EPOCH", retriable=True)
UnsupportedCompressionTypeError = _define(76, "UNSUPPORTED_COMPRESSION_TYPE")
StaleBrokerEpochError = _define(77, "STALE_BROKER_EPOCH")
OffsetNotAvailableError = _define(78, "OFFSET_NOT_AVAILABLE", retriable=True)
MemberIdRequiredError = _define(79, "MEMBER_ID_REQUIRED")
PreferredLeaderNotAvailableError = _define(80, "PREFERRED_LEADER_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
GroupMaxSizeReachedError = _define(81, "GROUP_MAX_SIZE_REACHED")
FencedInstanceIdError = _define(82, "FENCED_INSTANCE_ID")
EligibleLeadersNotAvailableError = _define(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
ElectionNotNeededError = _define(84, "ELECTION_NOT_NEEDED", retriable=True, invalid_metadata=True)
NoReassignmentInProgressError = _define(85, "NO_REASSIGNMENT_IN_PROGRESS")
GroupSubscribedToTopicError = _define(86, "GROUP_SUBSCRIBED_TO_TOPIC")
InvalidRecordError = _define(87, "INVALID_RECORD", also=_errors.InvalidRecordError)
UnstableOffsetCommitError = _define(88, "UNSTABLE_OFFSET_COMMIT", retriable=True)
ThrottlingQuotaExceededError = _define(89, "THROTTLING_QUOTA_EXCEEDED", retriable=True)
ProducerFencedError = _define(90, "PRODUCER_FENCED", also=_errors.ProducerFencedError)
ResourceNotFoundError = _define(91, "RESOURCE_NOT_FOUND")
DuplicateResourceError = _define(92, "DUPLICATE_RESOURCE")
UnacceptableCredentialError = _define(93, "UNACCEPTABLE_CREDENTIAL")
InconsistentVoterSetError = _define(94, "INCONSISTENT_VOTER_SET")
InvalidUpdateVersionError = _define(95, "INVALID_UPDATE_VERSION")
FeatureUpdateFailedError = _define(96, "FEATURE_UPDATE_FAILED")
PrincipalDeserializationFailureError = _define(97, "PRINCIPAL_DESERIALIZATION_FAILURE")
SnapshotNotFoundError = _define(98, "SNAPSHOT_NOT_FOUND")
PositionOutOfRangeError = _define(99, "POSITION_OUT_OF_RANGE")
UnknownTopicIdError = _define(100, "UNKNOWN_TOPIC_ID", retriable=True, invalid_metadata=True)
DuplicateBrokerRegistrationError = _define(101, "DUPLICATE_BROKER_REGISTRATION")
BrokerIdNotRegisteredError = _define(102, "BROKER_ID_NOT_REGISTERED")
InconsistentTopicIdError = _define(103, "INCONSISTENT_TOPIC_ID", retriable=True, invalid_metadata=True)
InconsistentClusterIdError = _define(104, "INCONSISTENT_CLUSTER_ID")
TransactionalIdNotFoundError = _define(105, "TRANSACTIONAL_ID_NOT_FOUND")
FetchSessionTopicIdError = _define(106, "FETCH_SESSION_TOPIC_ID_ERROR", retriable=True)
IneligibleReplicaError = _define(107, "INELIGIBLE_REPLICA")
NewLeaderElectedError = _define(108, "NEW_LEADER_ELECTED")
OffsetMovedToTieredStorageError = _define(109, "OFFSET_MOVED_TO_TIERED_STORAGE")
FencedMemberEpochError = _define(110, "FENCED_MEMBER_EPOCH")
UnreleasedInstanceIdError = _define(111, "UNRELEASED_INSTANCE_ID")
UnsupportedAssignorError = _define(112, "UNSUPPORTED_ASSIGNOR")
StaleMemberEpochError = _define(113, "STALE_MEMBER_EPOCH")
MismatchedEndpointTypeError = _define(114, "MISMATCHED_ENDPOINT_TYPE")
UnsupportedEndpointTypeError = _define(115, "UNSUPPORTED_ENDPOINT_TYPE")
UnknownControllerIdError = _define(116, "UNKNOWN_CONTROLLER_ID")
UnknownSubscriptionIdError = _define(117, "UNKNOWN_SUBSCRIPTION_ID")
TelemetryTooLargeError = _define(118, "TELEMETRY_TOO_LARGE")
InvalidRegistrationError = _define(119, "INVALID_REGISTRATION")
TransactionAbortableError = _define(120, "TRANSACTION_ABORTABLE")
InvalidRecordStateError = _define(121, "INVALID_RECORD_STATE")
ShareSessionNotFoundError = _define(122, "SHARE_SESSION_NOT_FOUND", retriable=True)
InvalidShareSessionEpochError = _define(123, "INVALID_SHARE_SESSION_EPOCH", retriable=True)
FencedStateEpochError = _define(124, "FENCED_STATE_EPOCH")
InvalidVoterKeyError = _define(125, "INVALID_VOTER_KEY")
DuplicateVoterError = _define(126, "DUPLICATE_VOTER")
VoterNotFoundError = _define(127, "VOTER_NOT_FOUND")
InvalidRegularExpressionError = _define(128, "INVALID_REGULAR_EXPRESSION")
RebootstrapRequiredError = _define(129, "REBOOTSTRAP_REQUIRED")
StreamsInvalidTopologyError = _define(130, "STREAMS_INVALID_TOPOLOGY")
StreamsInvalidTopologyEpochError = _define(131, "STREAMS_INVALID_TOPOLOGY_EPOCH")
StreamsTopologyFencedError = _define(132, "STREAMS_TOPOLOGY_FENCED")
ShareSessionLimitReachedError = _define(133, "SHARE_SESSION_LIMIT_REACHED", retriable=True)
GroupDeletionFailedError = _define(134, "GROUP_DELETION_FAILED")
StreamsTopologyDescriptionUpdateFailedError = _define(135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED")
ControllerIdNotRegisteredError = _define(136, "CONTROLLER_ID_NOT_REGISTERED")


ERROR_CLASSES: Mapping[int, type[KafkaError]] = MappingProxyType(_CLASSES)


def kafka_error(code: int, message: str | None = None) -> KafkaError:
    """The exception for a broker error code, with `message` (or the code's default message).

    An unknown code (from a newer broker) becomes an UnknownServerError, like Java's Errors.forCode, whose
    message and `code` attribute still carry the code received. Code 0 means success and raises ProtocolError.
    """
    cls = _CLASSES.get(code)
    if cls is not None:
        return cls(message)
    if code == 0:
        raise ProtocolError("error code 0 (NONE) means success; there is no exception for it")
    detail = f": {message}" if message else ""
    error = UnknownServerError(f"unknown Kafka error code {code}{detail}")
    error.code = code
    return error
