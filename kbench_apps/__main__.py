"""``python -m kbench_apps``: the kbench command."""

import sys

from kbench_apps.cli import main

sys.exit(main())
