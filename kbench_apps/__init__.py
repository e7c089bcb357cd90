"""The applications around the environment: the ``kbench`` command line, the agent runner, run logs and reports. The only code that imports ``agents``; the environment never does."""
