"""What the trusted side and the worker share and that imports neither: ``timing_stats`` (timing figures, the
stopping rule's precision test, the simple per-call timer, the clock captured before candidate code loads)."""
