"""The confined builder writes only in its scratch (builder/server.py): its temporary files go there too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_builders_temporary_files_go_to_its_scratch_even_where_its_parent_looked_up_tmp(tmp_path):
    # a confined builder may write only in its scratch, and a forked one inherits Python's cached /tmp from its
    # parent: a compile step that makes a temporary directory must get one in the scratch
    code = ("import tempfile, sys; tempfile.gettempdir(); "
            "from kbench_env.builder.server import scratch_environment; "
            "scratch_environment(sys.argv[1], {}); print(tempfile.mkdtemp(prefix='kb-'))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).parent == tmp_path
