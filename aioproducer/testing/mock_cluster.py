"""librdkafka's in-process mock Kafka cluster, driven through ctypes: multi-broker, with fault injection.

Owns only the ctypes binding of `rd_kafka_mock_*` from the librdkafka inside the confluent-kafka wheel; it must not
touch the producer. Limits of the mock (librdkafka's `rdkafka_mock.c`), worth knowing before trusting a green test:

- ApiVersions answers at most v2: a v3+ request gets error 35 (UNSUPPORTED_VERSION) with a body to be read as v0.
- An API it does not implement (CreateTopics, SaslHandshake, Produce above its maximum, ...) closes the connection
  without a reply: create topics with `MockCluster.create_topic`, never with an admin client.
- Idempotent sequence numbers are checked only for transactional producers; plain idempotent duplicates are appended.
- No CRC check, no TLS, no SASL. It replies to acks=0 too. An unknown topic gets UNKNOWN_TOPIC_OR_PARTITION (3).
- Request tracking records broker id, API key and a monotonic timestamp in microseconds; not the API version.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from aioproducer.errors import AioProducerError, ConfigError, FeatureNotAvailableError

__all__ = ["MockCluster", "TrackedRequest"]

_EXTRA_HINT = "aioproducer.testing needs confluent-kafka: install it with `pip install aioproducer[testing]`"
_RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512

_p = ctypes.c_void_p
_i16, _i32, _i64, _int, _size = ctypes.c_int16, ctypes.c_int32, ctypes.c_int64, ctypes.c_int, ctypes.c_size_t
_str = ctypes.c_char_p

# Fixed-argument signatures from librdkafka's src/rdkafka.h and src/rdkafka_mock.h (rd_kafka_resp_err_t is an enum,
# passed as int). The one variadic function is bound per call in `push_broker_request_errors`.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_conf_new": (_p, []),
    "rd_kafka_conf_set": (_int, [_p, _str, _str, _str, _size]),
    "rd_kafka_conf_destroy": (None, [_p]),
    "rd_kafka_new": (_p, [_int, _p, _str, _size]),
    "rd_kafka_destroy": (None, [_p]),
    "rd_kafka_err2str": (_str, [_int]),
    "rd_kafka_mock_cluster_new": (_p, [_p, _int]),
    "rd_kafka_mock_cluster_destroy": (None, [_p]),
    "rd_kafka_mock_cluster_bootstraps": (_str, [_p]),
    "rd_kafka_mock_topic_create": (_int, [_p, _str, _int, _int]),
    "rd_kafka_mock_topic_delete": (_int, [_p, _str]),
    "rd_kafka_mock_partition_set_leader": (_int, [_p, _str, _i32, _i32]),
    "rd_kafka_mock_broker_set_down": (_int, [_p, _i32]),
    "rd_kafka_mock_broker_set_up": (_int, [_p, _i32]),
    "rd_kafka_mock_broker_set_rtt": (_int, [_p, _i32, _int]),
    "rd_kafka_mock_set_apiversion": (_int, [_p, _i16, _i16, _i16]),
    "rd_kafka_mock_push_request_errors_array": (None, [_p, _i16, _size, ctypes.POINTER(_int)]),
    "rd_kafka_mock_clear_request_errors": (None, [_p, _i16]),
    "rd_kafka_mock_start_request_tracking": (None, [_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [_p]),
    "rd_kafka_mock_clear_requests": (None, [_p]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_p), [_p, ctypes.POINTER(_size)]),
    "rd_kafka_mock_request_id": (_i32, [_p]),
    "rd_kafka_mock_request_api_key": (_i16, [_p]),
    "rd_kafka_mock_request_timestamp": (_i64, [_p]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_p), _size]),
}


@dataclass(frozen=True)
class TrackedRequest:
    """One request a mock broker received while tracking was on.

    `timestamp_us` is librdkafka's monotonic clock (`rd_clock()`), comparable only with other tracked requests.
    """

    broker_id: int
    api_key: int
    timestamp_us: int


def _library_candidates() -> list[Path]:
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or spec.origin is None:
        raise ImportError(_EXTRA_HINT)
    package_dir = Path(spec.origin).parent
    # auditwheel puts vendored libraries in `<pkg>.libs` next to the package; delocate (macOS) in `<pkg>/.dylibs`.
    found = sorted(package_dir.parent.glob("confluent_kafka.libs/librdkafka*.so*"))
    found += sorted(package_dir.glob(".dylibs/librdkafka*.dylib"))
    return found


@functools.cache
def _librdkafka() -> ctypes.CDLL:
    candidates = _library_candidates()
    if not candidates:
        raise ImportError(f"no librdkafka shared library found inside the confluent-kafka install; {_EXTRA_HINT}")
    lib = ctypes.CDLL(str(candidates[0]))
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            func = getattr(lib, name)
        except AttributeError:
            raise FeatureNotAvailableError(
                f"{candidates[0].name} does not export {name}: upgrade confluent-kafka"
            ) from None
        func.restype = restype
        func.argtypes = argtypes
    return lib


def _error_text(lib: ctypes.CDLL, code: int) -> str:
    text: bytes | None = lib.rd_kafka_err2str(code)
    return f"{(text or b'?').decode()} (error {code})"


def _varargs_are_plain() -> bool:
    # ctypes passes every argument as a fixed one; that matches the variadic calling convention on x86-64 and on
    # Linux aarch64, but not on Apple arm64, where variadic arguments always go on the stack.
    return not (sys.platform == "darwin" and platform.machine() == "arm64")


class MockCluster:
    """A librdkafka mock cluster of `num_brokers` brokers (ids 1..N) listening on loopback ports.

    Its brokers run on librdkafka threads inside this process; `close()` (or leaving the `with` block) stops them.
    """

    def __init__(self, num_brokers: int = 3) -> None:
        if num_brokers < 1:
            raise ConfigError(f"num_brokers must be at least 1, got {num_brokers}")
        self._lib = _librdkafka()
        self.num_brokers = num_brokers
        self._rk = self._new_handle()
        cluster = self._lib.rd_kafka_mock_cluster_new(self._rk, num_brokers)
        if not cluster:
            self._lib.rd_kafka_destroy(self._rk)
            raise AioProducerError(f"rd_kafka_mock_cluster_new({num_brokers}) failed")
        self._cluster: int | None = cluster
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()

    def _new_handle(self) -> int:
        conf = self._lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        # The handle only hosts the cluster and never connects anywhere: hide its "no bootstrap.servers" notice.
        if self._lib.rd_kafka_conf_set(conf, b"log_level", b"4", errstr, _ERRSTR_SIZE) != 0:
            self._lib.rd_kafka_conf_destroy(conf)
            raise AioProducerError(f"rd_kafka_conf_set(log_level) failed: {errstr.value.decode()}")
        rk: int | None = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            # rd_kafka_new takes ownership of the configuration only when it succeeds.
            self._lib.rd_kafka_conf_destroy(conf)
            raise AioProducerError(f"rd_kafka_new failed: {errstr.value.decode()}")
        return rk

    def _handle(self) -> int:
        if self._cluster is None:
            raise AioProducerError("the mock cluster is closed")
        return self._cluster

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            raise AioProducerError(f"{what} failed: {_error_text(self._lib, code)}")

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create `name`; leaders are spread over the brokers. Fails if it exists."""
        if partitions < 1:
            raise ConfigError(f"partitions must be at least 1, got {partitions}")
        if not 1 <= replication_factor <= self.num_brokers:
            raise ConfigError(f"replication_factor must be in 1..{self.num_brokers}, got {replication_factor}")
        code = self._lib.rd_kafka_mock_topic_create(self._handle(), name.encode(), partitions, replication_factor)
        self._check(f"create_topic({name!r})", code)

    def delete_topic(self, name: str) -> None:
        """Delete `name`; deleting and creating it again with more partitions simulates partition growth.

        A client asking for the topic's metadata in between, with auto-creation allowed (the producer's default,
        `allow_auto_create_topics`), has the mock create it again with its default partition count, and the
        `create_topic` that follows fails: clients running across the two calls should not allow auto-creation.
        """
        self._check(f"delete_topic({name!r})", self._lib.rd_kafka_mock_topic_delete(self._handle(), name.encode()))

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader (-1: leaderless). Creates the topic if needed; clients see it on their next Metadata."""
        code = self._lib.rd_kafka_mock_partition_set_leader(self._handle(), topic.encode(), partition, broker_id)
        self._check(f"set_partition_leader({topic!r}, {partition}, {broker_id})", code)

    def set_broker_down(self, broker_id: int) -> None:
        """Disconnect the broker (-1: all) and refuse new connections; leaders do not move."""
        self._check(f"set_broker_down({broker_id})", self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id))

    def set_broker_up(self, broker_id: int) -> None:
        """Let the broker (-1: all) accept connections again."""
        self._check(f"set_broker_up({broker_id})", self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id))

    def set_broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker (-1: all) by `rtt_ms`."""
        code = self._lib.rd_kafka_mock_broker_set_rtt(self._handle(), broker_id, rtt_ms)
        self._check(f"set_broker_rtt({broker_id}, {rtt_ms})", code)

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow the versions advertised for `api_key` (both -1: disable the API); never above the mock's maximum."""
        code = self._lib.rd_kafka_mock_set_apiversion(self._handle(), api_key, min_version, max_version)
        self._check(f"set_api_version({api_key}, {min_version}, {max_version})", code)

    def push_request_errors(self, api_key: int, *error_codes: int) -> None:
        """Fail the next `len(error_codes)` requests of `api_key`, on any broker, with these codes in order.

        librdkafka's -195 (`_TRANSPORT`) makes the broker close the connection instead of replying.
        """
        array = (_int * len(error_codes))(*error_codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._handle(), api_key, len(error_codes), array)

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still pushed for `api_key` (cluster-wide stack)."""
        self._lib.rd_kafka_mock_clear_request_errors(self._handle(), api_key)

    def push_broker_request_errors(self, broker_id: int, api_key: int, errors: Sequence[tuple[int, int]]) -> None:
        """Answer the next requests of `api_key` on one broker with (error_code, rtt_ms) pairs, in order.

        Code 0 with a non-zero rtt delays a successful reply. Broker errors take precedence over cluster errors.
        """
        if not _varargs_are_plain():
            raise FeatureNotAvailableError("push_broker_request_errors needs a variadic call ctypes cannot make here")
        pairs = [int(value) for pair in errors for value in pair]
        # The va-arg list is (int err, int rtt_ms) * cnt: bind a prototype with exactly that many int arguments.
        prototype = ctypes.CFUNCTYPE(_int, _p, _i32, _i16, _size, *([_int] * len(pairs)))
        push = prototype(("rd_kafka_mock_broker_push_request_error_rtts", self._lib))
        code = push(self._handle(), broker_id, api_key, len(errors), *pairs)
        self._check(f"push_broker_request_errors({broker_id}, {api_key})", code)

    def start_request_tracking(self) -> None:
        """Record every request the brokers receive from now on (see `requests()`)."""
        self._lib.rd_kafka_mock_start_request_tracking(self._handle())

    def stop_request_tracking(self) -> None:
        """Stop recording and discard what was recorded (this librdkafka clears the list): read `requests()` first."""
        self._lib.rd_kafka_mock_stop_request_tracking(self._handle())

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        self._lib.rd_kafka_mock_clear_requests(self._handle())

    def requests(self) -> list[TrackedRequest]:
        """The requests recorded so far, in arrival order."""
        count = _size(0)
        array = self._lib.rd_kafka_mock_get_requests(self._handle(), ctypes.byref(count))
        if not array:
            return []
        try:
            return [self._tracked(array[i]) for i in range(count.value)]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(array, count.value)

    def _tracked(self, request: int) -> TrackedRequest:
        return TrackedRequest(
            broker_id=self._lib.rd_kafka_mock_request_id(request),
            api_key=self._lib.rd_kafka_mock_request_api_key(request),
            timestamp_us=self._lib.rd_kafka_mock_request_timestamp(request),
        )

    def close(self) -> None:
        """Stop the brokers and free the cluster; idempotent. Clients still connected see their connections close."""
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            self._lib.rd_kafka_mock_cluster_destroy(cluster)
            self._lib.rd_kafka_destroy(self._rk)

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
