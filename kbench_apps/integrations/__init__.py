"""Adapters that let other RL and evaluation frameworks drive ``KBench-v0``: one module per framework, each behind
its own install extra (``pip install kbench[inspect]`` and so on). Nothing in ``kbench_env`` imports them, and this
package imports none of them: a module is loaded only when its framework asks for it."""
