"""The tasks a server offers, loaded once at start from the server's own suite: a request names a task or a
suite, and the name is looked up here, never used as a path (no file name from a request reaches the disk)."""

from __future__ import annotations

from kbench_env.tasks.suite import SUITE_FOLDERS, load_suite, named_suites
from kbench_env.tasks.task import Task

from kbench_env.serving.admission import Refused


class TaskRegistry:
    def __init__(self, suite: str = "all", dtype: str | None = None):
        self.spec = suite
        self.tasks: dict[str, Task] = {t.name: t for t in load_suite(suite, dtype=dtype)}
        if not self.tasks:
            raise ValueError(f"suite {suite!r} has no tasks to serve")
        self._named = named_suites()
        #: what a reset that names neither task nor suite draws from: the "default" suite, as a local env does,
        #: where the server serves all of it; else everything the server serves
        self.default_spec = "default" if set(self._named.get("default", ())) <= set(self.tasks) else "all"

    def task(self, name) -> Task:
        """The task called ``name`` ("level1/relu", or a bare "relu" when only one task has that stem)."""
        if not isinstance(name, str) or not name:
            raise Refused(400, f"task must be a task name (GET /tasks lists them), not {name!r}")
        if name in self.tasks:
            return self.tasks[name]
        stems = [t for n, t in self.tasks.items() if n.rsplit("/", 1)[-1] == name]
        if len(stems) == 1:
            return stems[0]
        raise Refused(404, f"no task named {name[:200]!r} on this server (it serves suite {self.spec!r}; GET /tasks "
                           f"lists its {len(self.tasks)} tasks)")

    def suite(self, spec) -> list[Task]:
        """The tasks of a suite name ("default", "all", a level folder, a name from suites.json, or a comma list
        of these), in the order ``load_suite`` gives locally, so a seeded draw picks the same task."""
        if not isinstance(spec, str) or not spec.strip():
            raise Refused(400, f"suite must be a suite name, not {spec!r}")
        out: list[Task] = []
        for part in [s.strip() for s in spec.split(",") if s.strip()]:
            if part == "all":
                out += list(self.tasks.values())
            elif part in SUITE_FOLDERS:
                out += [t for n, t in self.tasks.items() if n.startswith(part + "/")]
            elif part in self._named:
                out += [self.task(n) for n in self._named[part]]
            else:
                out.append(self.task(part))
        seen, unique = set(), []
        for t in out:
            if t.name not in seen:
                seen.add(t.name)
                unique.append(t)
        if not unique:
            raise Refused(404, f"suite {spec[:200]!r} has no task on this server")
        return unique

    def names(self) -> list[str]:
        return list(self.tasks)
