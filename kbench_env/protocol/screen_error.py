"""The refusal of an action before anything is built: ``ScreenError``, whose message is what the agent reads.

Raised by the trusted side's screen (pipeline/screen.py, pipeline/formats.py) and by each backend's own screen
(``Backend.screen``, backends/): defined here, below both, so that the backends, which a worker loads too, need not
import the pipeline. Imports nothing (the screen and the remote clients stay free of torch).
"""

from __future__ import annotations


class ScreenError(ValueError):
    """The action was rejected before compiling; the message says why."""
