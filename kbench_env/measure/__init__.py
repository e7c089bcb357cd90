"""What both sides of the trust boundary share, and that imports neither the trusted pipeline nor the worker: the
comparison of outputs (``compare``), inputs made from inputs (``inputs``), timing statistics and the clock
(``stats``), and whose work a profile shows (``ownership``). The worker, the backends and the trusted side import
it; tests/test_boundary.py holds it to that."""
