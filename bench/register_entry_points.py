"""Registers this checkout's entry points (the `kbench` command, the `kbench.agents` group) in a folder on
sys.path, for a machine where the checkout cannot be pip-installed (the GPU image: no registry access). Usage:
`python3 bench/register_entry_points.py /tmp/site`."""
import pathlib, sys, tomllib
p = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
d = pathlib.Path(sys.argv[1]) / f"kbench-{p['version']}.dist-info"
d.mkdir(parents=True, exist_ok=True)
(d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kbench\nVersion: {p['version']}\n")
lines = ["[console_scripts]"] + [f"{k} = {v}" for k, v in p.get("scripts", {}).items()]
for group, eps in p.get("entry-points", {}).items():
    lines += ["", f"[{group}]"] + [f"{k} = {v}" for k, v in eps.items()]
(d / "entry_points.txt").write_text("\n".join(lines) + "\n")
print(d, len(lines))
