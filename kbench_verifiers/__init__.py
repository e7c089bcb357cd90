"""The verifiers plugin module for ``KBench-v0``: ``vf eval kbench-verifiers`` (taskset id ``kbench-verifiers``)
imports this module by that name and takes the taskset, env and harness it exports in ``__all__``. The classes
live in ``kbench_apps.integrations.verifiers_env`` (the ``[verifiers]`` extra)."""

from kbench_apps.integrations.verifiers_env import (
    KBenchChatHarness,
    KBenchChatHarnessConfig,
    KBenchTask,
    KBenchTaskset,
    KBenchTasksetConfig,
    KBenchVerifiersEnv,
    KBenchVerifiersEnvConfig,
    load_environment,
)

__all__ = ["KBenchChatHarness", "KBenchChatHarnessConfig", "KBenchTask", "KBenchTaskset", "KBenchTasksetConfig",
           "KBenchVerifiersEnv", "KBenchVerifiersEnvConfig", "load_environment"]
