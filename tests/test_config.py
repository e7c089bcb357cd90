"""One EvaluatorConfig holds every Evaluator option (kbench_env/config/evaluator_config.py), and one module reads the
KBENCH_* environment variables (kbench_env/config/environ.py)."""

from __future__ import annotations

import dataclasses

import pytest

from kbench_env.config import OPTIONS, EvaluatorConfig, IntegrityConfig, ResourcesConfig, TimingConfig, environ
from kbench_env.pipeline import formats, rules
from kbench_env.pipeline.evaluator import Evaluator, resolve


def test_every_option_is_documented_in_its_group():
    docs = {None: EvaluatorConfig.__doc__, "timing": TimingConfig.__doc__, "integrity": IntegrityConfig.__doc__,
            "resources": ResourcesConfig.__doc__}
    for name, (group, there) in OPTIONS.items():
        assert f"\n    {there}" in docs[group] or f"\n    {there} (the option ``{name}``)" in docs[group], name


def test_the_config_defaults_are_the_pipeline_s():
    config = EvaluatorConfig()
    assert config.integrity.rules == rules.DEFAULT and config.format == formats.DEFAULT


def test_options_go_to_their_group_and_none_keeps_the_default(monkeypatch):
    monkeypatch.delenv("KBENCH_SPARE_WORKER", raising=False)
    config = EvaluatorConfig.from_options(device="cpu", timing={"min_reps": 3}, noise=0.5, rules="kernelbench",
                                          spare_worker=False, shared_checks=None)
    assert (config.device, config.timing.params, config.timing.noise) == ("cpu", {"min_reps": 3}, 0.5)
    assert config.integrity.rules == "kernelbench" and config.resources.spare_worker is False
    assert config.resources.shared_checks is None
    assert EvaluatorConfig.from_options(**config.options()) == config
    assert config.replace(noise=None) == config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.device = "cuda"  # type: ignore[misc]
    with pytest.raises(TypeError, match="input_sets"):
        EvaluatorConfig.from_options(input_sets=3)


def test_the_environment_sets_the_options_it_names(monkeypatch):
    monkeypatch.setenv("KBENCH_COMPILE_BASELINE", "1")
    monkeypatch.setenv("KBENCH_SPARE_WORKER", "0")
    monkeypatch.setenv("KBENCH_SHARED_CHECKS", "0")
    monkeypatch.setenv("KBENCH_REFERENCE_CACHE", "/somewhere")
    config = EvaluatorConfig()
    assert config.timing.compile_baseline is True and config.resources.spare_worker is False
    assert config.resources.shared_checks is False and config.timing.reference_cache == "/somewhere"
    given = EvaluatorConfig.from_options(compile_baseline=False, spare_worker=2)  # an option given wins
    assert given.timing.compile_baseline is False and given.resources.spare_worker == 2
    monkeypatch.setenv("KBENCH_COMPILE_BASELINE", "maybe")  # neither 0 nor 1: the device decides
    assert EvaluatorConfig().timing.compile_baseline is None


def test_environ_reads_each_variable_as_its_table_says(monkeypatch):
    for name, var in environ.VARIABLES.items():
        assert name.startswith("KBENCH_") and var.meaning and var.read_by
        monkeypatch.delenv(name, raising=False)
        assert environ.get(name) == var.unset
    assert environ.get("KBENCH_THREADS", {"KBENCH_THREADS": "3"}) == 3
    assert environ.get("KBENCH_TIMING_BOOST", {"KBENCH_TIMING_BOOST": "0"}) is False
    assert environ.get("KBENCH_CACHE_MAX_BYTES", {"KBENCH_CACHE_MAX_BYTES": "lots"}) is None
    assert environ.get("KBENCH_REFERENCE_CACHE", {"KBENCH_REFERENCE_CACHE": ""}) is None
    assert environ.cutlass_checkouts({"KBENCH_CUTLASS": " ", "CUTLASS_PATH": " /c "}) == ["/c"]


def test_the_evaluator_takes_a_config_or_options_and_decides_the_rest(tmp_path):
    config = EvaluatorConfig.from_options(device="cpu", spare_worker=False, cache_dir=tmp_path, noise=0.25)
    ev = Evaluator(config, check_calls=2)
    try:
        assert ev.config.timing.noise == 0.25 and ev.config.timing.check_calls == 2
        assert (ev.device, ev.backend_name, ev.format, ev.rules) == ("cpu", "cpu", "kernelbench", "strict")
        assert ev.compile_baseline is False and ev.shared_checks is False and ev.config.resources.limits is not None
        assert ev.config.timing.reference_cache is False and ev.baselines.disk_root is None  # off on the CPU
        assert resolve(ev.config) == ev.config  # decided once: deciding again changes nothing
        with pytest.raises(AttributeError):
            ev.time_candidates = False  # the config is the one record of the options
    finally:
        ev.close()
    with pytest.raises(TypeError, match="EvaluatorConfig"):
        Evaluator("cpu")
    with pytest.raises(ValueError, match="baseline"):
        Evaluator(device="cpu", baseline="fastest", spare_worker=False)
