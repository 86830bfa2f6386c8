# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of `aioproducer.deliveries.delivery`'s `Delivery`, `new_delivery` and `run_callbacks_of`: the same handle in
a C struct, the same rules (see the original; the test suite runs both twins against asyncio.Future), and the
methods asyncio calls several times per awaited record (done, result, exception, add_done_callback) without a
Python frame. A `RecordMetadata` is allocated as the named tuple it is, without a Python call.

A handle waiting for its batch with done callbacks is not tracked by the cyclic garbage collector meanwhile (the
collector's own choice for objects that cannot be in a garbage cycle, made here by a rule): in a done-callback loop
most handles outlived two young collections and were walked by every full collection, a sixth of a record's cost.
It cannot be in a garbage cycle while it waits on an outcome a running sender holds (`BatchOutcome.held`: set by the
Producer for its batches, cleared when its sender exits; never set by MockProducer, whose batches may be dropped
unsettled): the outcome refers to it, and the sender holds the outcome until it settles it. It is tracked again as
soon as it stops waiting (its callbacks run, or the loop dropped their call unrun; split onto a half no sender holds;
or its sender exited, see `track_again`), so a cycle through it (a callback that refers back to it) is collected as
before. One case is left: an event loop closed without cancelling its tasks (asyncio.run, asyncio.Runner and
pytest-asyncio all cancel them) while a producer that was never closed still buffers records with callbacks keeps
those records, their batches and their callbacks."""

cimport cython
from cpython.contextvars cimport (
    PyContext_CheckExact,
    PyContext_Copy,
    PyContext_CopyCurrent,
    PyContext_Enter,
    PyContext_Exit,
)
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport int64_t

from asyncio import CancelledError, InvalidStateError

from aioproducer.deliveries.delivery import callbacks_of, keep_callbacks, resolve
from aioproducer.models import RecordMetadata

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(object op)
    void PyObject_GC_Track(object op)
    int PyObject_GC_IsTracked(object op)


cdef class Delivery:
    """Twin of `aioproducer.deliveries.delivery.Delivery`: one buffered record's delivery, awaitable and future-compatible."""

    def get_loop(self):
        return self._outcome.loop

    def cancelled(self):
        return self._cancelled

    def done(self):
        return self._is_done()

    cdef bint _is_done(self) except -1:
        if self._cancelled:
            return True
        cdef Py_ssize_t index = self._index
        return bool(resolved(self._outcome, &index).done)

    def result(self):
        """The record's metadata; raises its error, CancelledError, or InvalidStateError while pending."""
        if self._cancelled:
            raise self._make_cancelled_error()
        cdef Py_ssize_t index = self._index
        outcome = resolved(self._outcome, &index)
        if not outcome.done:
            raise InvalidStateError("the record is not delivered yet")
        error = outcome.error
        if error is not None:
            raise error.with_traceback(outcome.error_traceback)  # see BatchOutcome.error_traceback
        return record_metadata(outcome.topic, outcome.partition, outcome.base_offset, outcome.log_append_time_ms,
                               index, self._timestamp_ms, self._key_size, self._value_size)

    def exception(self):
        if self._cancelled:
            raise self._make_cancelled_error()
        cdef Py_ssize_t index = self._index
        outcome = resolved(self._outcome, &index)
        if not outcome.done:
            raise InvalidStateError("the record is not delivered yet")
        return outcome.error

    def add_done_callback(self, fn, *, context=None):
        """Call `fn(delivery)` on the loop once the record is settled (or the delivery cancelled)."""
        if not callable(fn):  # refused here: an empty slot is None, and asyncio would fail only when settling
            raise TypeError(f"a callable object was expected by add_done_callback(), got {fn!r}")
        cdef bint snapshot = context is None
        if snapshot:
            context = PyContext_CopyCurrent()  # contextvars.copy_context() without a Python call
        cdef Py_ssize_t index = self._index
        carrier = resolved(self._outcome, &index)
        if self._cancelled or carrier.done:
            self._outcome.loop.call_soon(fn, self, context=context)
            return
        if self._callback is None:
            if snapshot:
                # The copy asyncio takes per callback, shared with the batch's other records while the contextvars
                # are the same: one snapshot object instead of one per record, which the cyclic collector would
                # walk until the batch settles (a fifth of a record's cost in a done-callback loop). Sharing is
                # invisible: each callback runs in its own copy of the snapshot (run_callbacks_of).
                shared = carrier.context_snapshot
                if shared is not None and same_variables(context, shared):
                    context = shared
                else:
                    carrier.context_snapshot = context
            self._callback = fn
            self._callback_context = context
            self._callback_context_shared = snapshot
        elif self._callbacks is None:
            self._callbacks = [(fn, context)]
        else:
            (<list>self._callbacks).append((fn, context))
        if not self._watching:
            self._watching = True
            carrier.deliveries.append(self)
            if carrier.held:  # while a running sender holds its batch: see the module's docstring
                PyObject_GC_UnTrack(self)

    cdef void _own_context(self):
        """Before the first callback's context leaves run_callbacks_of's hands: a private copy of a shared snapshot
        (the loop's Handle runs a callback in the very context it is given)."""
        if self._callback_context_shared:
            self._callback_context = PyContext_Copy(self._callback_context)
            self._callback_context_shared = False

    def remove_done_callback(self, fn):
        """Forget `fn` while the record is pending; returns how many were removed (see the original)."""
        if self._is_done():
            return 0
        self._own_context()
        callbacks = callbacks_of(self)
        kept = [(callback, context) for callback, context in callbacks if callback != fn]
        keep_callbacks(self, kept)
        return len(callbacks) - len(kept)

    def cancel(self, msg=None):
        """Stop waiting (the record is still delivered). False when the record was already settled."""
        if self._is_done():
            return False
        self._cancelled = True
        self._cancel_message = msg
        self._run_callbacks()
        return True

    def _make_cancelled_error(self):
        message = self._cancel_message
        return CancelledError("" if message is None else message)

    def __await__(self):
        if not self._is_done():
            self._asyncio_future_blocking = True  # asyncio's protocol: the task then waits on this handle
            yield self
            if not self._is_done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    def __iter__(self):
        return self.__await__()

    def _run_callbacks(self):
        self._own_context()
        callbacks = callbacks_of(self)
        keep_callbacks(self, [])
        if callbacks:
            loop = self.get_loop()
            for fn, context in callbacks:
                loop.call_soon(fn, self, context=context)

    def __repr__(self):
        outcome, index = resolve(self._outcome, self._index)
        return f"<Delivery {outcome.topic}-{outcome.partition} #{index} of {outcome!r}>"


cdef Delivery make_delivery(object outcome, Py_ssize_t index, int64_t timestamp_ms, Py_ssize_t key_size,
                            Py_ssize_t value_size):
    """A pending Delivery, allocated without a Python call (the fields' C defaults are the pure twin's)."""
    cdef Delivery delivery = Delivery.__new__(Delivery)
    delivery._outcome = outcome
    delivery._index = index
    delivery._timestamp_ms = timestamp_ms
    delivery._key_size = key_size
    delivery._value_size = value_size
    return delivery


def new_delivery(outcome, Py_ssize_t index, int64_t timestamp_ms, Py_ssize_t key_size, Py_ssize_t value_size):
    """Twin of `aioproducer.deliveries.delivery.new_delivery`."""
    return make_delivery(outcome, index, timestamp_ms, key_size, value_size)


cdef object resolved(object outcome, Py_ssize_t* index):
    """Twin of `aioproducer.deliveries.delivery.resolve`: the outcome that carries the record now (`index` is updated)."""
    cdef Py_ssize_t split_at
    while True:
        first = outcome.first
        if first is None:
            return outcome
        second = outcome.second
        if second is None:
            return outcome
        split_at = outcome.split_at
        if index[0] < split_at:
            outcome = first
        else:
            index[0] -= split_at
            outcome = second


cdef inline void _put(object metadata, Py_ssize_t position, object item) noexcept:
    Py_INCREF(item)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(metadata, position, item)


cdef object record_metadata(object topic, object partition, int64_t base_offset, int64_t log_append_time_ms,
                            Py_ssize_t index, int64_t timestamp_ms, int64_t key_size, int64_t value_size):
    """Twin of `BatchOutcome.metadata`: a RecordMetadata, allocated as the named tuple it is."""
    return metadata_of(topic, partition, offset_of(base_offset, index), timestamp_of(log_append_time_ms, timestamp_ms),
                       key_size, value_size)


cdef object metadata_of(object topic, object partition, object offset, object timestamp_ms, object key_size,
                        object value_size):
    """A RecordMetadata of these very objects (record_metadata's fields, worked out by the caller)."""
    cdef object metadata = PyType_GenericAlloc(<PyTypeObject*>RecordMetadata, 6)
    _put(metadata, 0, topic)
    _put(metadata, 1, partition)
    _put(metadata, 2, offset)
    _put(metadata, 3, timestamp_ms)
    _put(metadata, 4, key_size)
    _put(metadata, 5, value_size)
    # Only a str and ints inside: the collector would untrack it at its next pass anyway.
    PyObject_GC_UnTrack(metadata)
    return metadata


cdef object _ABSENT = object()


cdef bint same_variables(object context, object other) noexcept:
    """Whether two Contexts map the same variables to the very same objects. Identity only, never `==`: a value's
    __eq__ may raise (an array's) or find equal an object that is not the one a callback must see. Anything
    unexpected answers False, which only costs a copy."""
    if context is other:
        return True
    cdef Py_ssize_t count
    try:
        count = len(context)
        if count != len(other):
            return False
        if count == 0:
            return True  # no variable set (most callbacks): no iterator to make
        for variable, value in context.items():
            if other.get(variable, _ABSENT) is not value:
                return False
        return True
    except Exception:
        return False


cdef inline object run_in(object context, object fn, object delivery):
    """`context.run(fn, delivery)`, through the C API for a plain Context (the one a callback gets by default):
    Context.run's own steps (enter, call, exit, a context already entered refused) without a method call."""
    if not PyContext_CheckExact(context):
        return context.run(fn, delivery)
    PyContext_Enter(context)
    try:
        return fn(delivery)
    finally:
        PyContext_Exit(context)


cdef inline void _track(object delivery) noexcept:
    if not PyObject_GC_IsTracked(delivery):
        PyObject_GC_Track(delivery)


cdef void _track_all(list deliveries) noexcept:
    for delivery in deliveries:
        if type(delivery) is Delivery:
            _track(delivery)


def track_again(list deliveries):
    """Twin of `aioproducer.deliveries.delivery.track_again`: the waiting handles among `deliveries` are tracked by
    the cyclic collector again (nothing may run their callbacks any more)."""
    _track_all(deliveries)


@cython.final
cdef class _SettledCallbacks:
    """A settled batch's callbacks as one loop callback: should the loop drop it unrun (closed first), the handles it
    carries are tracked again as it goes (tracked, they are collected with their callbacks); run, each was tracked
    just before its callbacks ran. Tracking them all at settling instead kept them in the young generation until
    the call ran, for every collection meanwhile to walk."""

    cdef list deliveries

    def __cinit__(self, list deliveries):
        self.deliveries = deliveries

    def __call__(self):
        run_callbacks_of(self.deliveries)

    def __dealloc__(self):
        if self.deliveries is not None:
            _track_all(self.deliveries)


def schedule_callbacks(loop, list deliveries):
    """Twin of `aioproducer.deliveries.delivery.schedule_callbacks`."""
    loop.call_soon(_SettledCallbacks(deliveries))


def run_callbacks_of(list deliveries):
    """Twin of `aioproducer.deliveries.delivery.run_callbacks_of`: run a settled batch's waiting records' done callbacks in
    one loop callback (see the original for the rules on raising callbacks)."""
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t count = len(deliveries)
    cdef Delivery delivery
    cdef list later
    cdef bint shared
    # The working copy of a shared context snapshot (see add_done_callback), reused by the next record with the same
    # snapshot while no callback changed it: each callback starts from the snapshot's variables, as with asyncio.
    snapshot = None
    working = None
    loop = None
    try:
        while position < count:
            delivery = <Delivery?>deliveries[position]
            position += 1
            delivery._watching = False
            _track(delivery)
            fn = delivery._callback
            if delivery._cancelled or fn is None:
                continue
            context = delivery._callback_context
            shared = delivery._callback_context_shared
            later = delivery._callbacks
            delivery._callback = None
            delivery._callback_context = None
            delivery._callback_context_shared = False
            delivery._callbacks = None
            if shared:
                if context is not snapshot or working is None:
                    snapshot = context
                    working = PyContext_Copy(snapshot)
                context = working
            while True:
                try:
                    run_in(context, fn, delivery)
                except (SystemExit, KeyboardInterrupt):
                    if later:
                        keep_callbacks(delivery, later)
                        position -= 1
                    raise
                except BaseException as exc:
                    if loop is None:
                        loop = delivery.get_loop()
                    loop.call_exception_handler(
                        {"message": f"Exception in callback {fn!r}({delivery!r})", "exception": exc,
                         "future": delivery}
                    )
                if shared:
                    shared = False  # the later callbacks have contexts of their own
                    if not same_variables(working, snapshot):  # the callback set a variable: the next needs a copy
                        working = None
                if not later:
                    break
                fn, context = later.pop(0)
    finally:
        if position < count:
            schedule_callbacks(deliveries[0].get_loop(), deliveries[position:])
