"""What callers get back as batches settle: a record's `Delivery`, many records' results (`send_many`,
`wait`), a table's report. Internal, but for `Delivery` (exported by `aioproducer`).
"""
