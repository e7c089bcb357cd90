"""The worker process: runs candidate code (untrusted) on the inputs it is sent and replies by the protocol."""
