# cython: language_level=3
"""Compiled twin of `aioproducer.buffer.pool.BufferPool`: the same counts in a C struct (see the original)."""


cdef class BufferPool:
    """Twin of `aioproducer.buffer.pool.BufferPool`."""

    def __init__(self, Py_ssize_t total_bytes):
        self.total_bytes = total_bytes
        self.used_bytes = 0
        self.waiters = 0

    @property
    def available_bytes(self):
        """Bytes not charged to any record (Java's buffer-available-bytes)."""
        return self.total_bytes - self.used_bytes

    def has_room(self, Py_ssize_t size):
        """Whether `size` more bytes fit."""
        return self.used_bytes + size <= self.total_bytes

    def reserve(self, Py_ssize_t size):
        """Charge `size` bytes (the caller checked the room, or is placing what it already waited for)."""
        self.used_bytes += size

    def release(self, Py_ssize_t size):
        """Give back `size` bytes charged before."""
        self.used_bytes -= size

    def begin_wait(self):
        """A caller starts waiting for room."""
        self.waiters += 1

    def end_wait(self):
        """A waiting caller got its room, gave up, or was failed."""
        self.waiters -= 1
