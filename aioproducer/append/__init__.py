"""The caller's side of the producer: a record (or a table's row) validated, serialized, partitioned and
appended to its partition's open batch, with its memory charged. Internal: no stable API; see `Producer`.
"""
