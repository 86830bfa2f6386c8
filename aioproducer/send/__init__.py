"""The sender task: draining ready batches into Produce requests, closing them for the wire (the batch
pipeline, compressed on a worker thread when compiled), pacing compression on the loop, settling the answers.
Internal: no stable API.
"""
