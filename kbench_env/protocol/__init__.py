"""The messages between the trusted side and a worker, and their framing on the wire."""
