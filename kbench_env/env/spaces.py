"""The characters and lengths of KBench-v0's text spaces, shared by the local env and the remote client (no heavy
imports: the client imports this without torch)."""

from __future__ import annotations

import string

#: Characters an action may hold (actions outside it, non-ASCII text, are still accepted by ``step``).
CHARSET = string.printable
#: Characters an observation may hold: printable ASCII and the non-ASCII signs the feedback prints ("±" of a
#: time's spread). Other characters of a compiler's or a program's text are written as ASCII: typographic quotes
#: and dashes as their plain forms, anything else as its Python escape (``\u00e9``), so nothing is lost.
OBSERVATION_CHARSET = string.printable + "±"
MAX_OBSERVATION_CHARS = 64_000
