# cython: language_level=3
"""Compiled twin of `aioproducer.models.ProducerRecord`'s constructor: the same fields in the same order, built
without a Python frame; a record whose fields are all None, bytes, str or int is untracked by the cyclic garbage
collector (it can never be part of a reference cycle), as CPython untracks plain tuples but not a subclass's."""

from cpython.bytes cimport PyBytes_CheckExact
from cpython.long cimport PyLong_CheckExact
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_CheckExact

from aioproducer.validation import header_pairs

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(object op)

_RECORD_TYPE = None  # aioproducer.models.ProducerRecord, set by `adopt`


def adopt(record_type):
    """The record type whose exact instances may be untracked (a user's subclass may carry attributes that refer
    back: it stays tracked)."""
    global _RECORD_TYPE
    _RECORD_TYPE = record_type


cdef inline void _put(object record, Py_ssize_t position, object item) noexcept:
    Py_INCREF(item)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(record, position, item)


cdef inline bint _atomic(object item) noexcept:
    return item is None or PyBytes_CheckExact(item) or PyUnicode_CheckExact(item) or PyLong_CheckExact(item)


def ProducerRecord(cls, topic, value=None, *, key=None, headers=None, partition=None, timestamp_ms=None):
    """Twin of `ProducerRecord.__new__`, named after the class: an argument error names it, as the original's does,
    and not this module (Java's `ProducerRecord(topic, key, value)` order is refused with a TypeError)."""
    if headers is not None and type(headers) is not list and type(headers) is not tuple:
        headers = header_pairs(headers)  # the rule is validation's: a mapping is kept as its pairs
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        # Only a tuple type has room for the six fields: anything else gets tuple.__new__'s own TypeError.
        return tuple.__new__(cls, (topic, value, key, headers, partition, timestamp_ms))
    cdef object record = PyType_GenericAlloc(<PyTypeObject*>cls, 6)
    _put(record, 0, topic)
    _put(record, 1, value)
    _put(record, 2, key)
    _put(record, 3, headers)
    _put(record, 4, partition)
    _put(record, 5, timestamp_ms)
    if (
        cls is _RECORD_TYPE and _atomic(topic) and _atomic(value) and _atomic(key) and headers is None
        and _atomic(partition) and _atomic(timestamp_ms)
    ):
        PyObject_GC_UnTrack(record)
    return record
