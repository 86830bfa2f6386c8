"""The producer's buffer (Java's RecordAccumulator and BufferPool): batches per partition, when each may go,
and the buffer memory they hold. Internal: no stable API.
"""
