"""Rendered pages are dcgm-exporter's: promtool accepts them, prometheus_client parses them, and
their shape (family order, HELP/TYPE text, label order, number format) is the real samples'."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator.fields import EXPORTER_FIELDS
from simulator.fleet import FleetSpec, Host
from simulator.sim import FleetSimulator

from .conftest import DATA, T0

LINE = re.compile(r"^(?P<name>[A-Z0-9_]+)\{(?P<labels>.*)\} (?P<value>\S+)$")
LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')
FLOAT = re.compile(r"^\d+\.\d{6}$")
INT = re.compile(r"^\d+$")


def shape(page: str) -> tuple[list[str], dict[str, set[tuple[str, ...]]], dict[str, str]]:
    """(HELP/TYPE lines in order, label-name sequences per family, number format per family)."""
    headers: list[str] = []
    labels: dict[str, set[tuple[str, ...]]] = {}
    formats: dict[str, str] = {}
    for line in page.splitlines():
        if line.startswith("#"):
            headers.append(line)
            continue
        match = LINE.match(line)
        assert match, line
        name = match["name"]
        labels.setdefault(name, set()).add(tuple(k for k, _ in LABEL.findall(match["labels"])))
        value = match["value"]
        formats[name] = "float" if FLOAT.match(value) else "int" if INT.match(value) else value
    return headers, labels, formats


def host_of(sim: FleetSimulator, *, scheduler: str, mig: bool) -> Host:
    return next(h for h in sim.hosts if h.scheduler == scheduler and h.mig == mig)


def assert_same_shape(
    page: str, sample_name: str, *, optional: frozenset[str] = frozenset()
) -> None:
    sample = (DATA / sample_name).read_text()
    s_headers, s_labels, s_formats = shape(sample)
    headers, labels, formats = shape(page)
    in_sample = {h.split()[2] for h in s_headers}
    assert [h for h in headers if h.split()[2] in in_sample] == s_headers
    for name, keys in s_labels.items():
        ours = {tuple(k for k in seq if k not in optional) for seq in labels[name]}
        assert ours == {tuple(k for k in seq if k not in optional) for seq in keys}, name
        assert formats[name] == s_formats[name], name


def test_k8s_page_has_the_release_samples_shape(sim: FleetSimulator) -> None:
    page = sim.page(host_of(sim, scheduler="k8s", mig=False), T0 + 3600)
    assert_same_shape(page, "h100_k8s_release.prom")


def test_slurm_page_has_the_slurm_samples_shape_with_hpc_job_only_on_held_gpus(
    sim: FleetSimulator,
) -> None:
    host = host_of(sim, scheduler="slurm", mig=False)
    pages = [sim.page(host, T0 + k * 1800) for k in range(48)]
    for page in pages:
        assert_same_shape(page, "h100_slurm_main.prom", optional=frozenset({"hpc_job"}))
    held = [line for page in pages for line in page.splitlines() if 'hpc_job="' in line]
    free = [line for page in pages for line in page.splitlines() if "hpc_job" not in line]
    assert held and any(not line.startswith("#") for line in free)
    assert all(re.search(r'hpc_job="\d+"', line) for line in held)


def test_mig_page_has_the_mig_samples_shape_and_no_gpu_util(sim: FleetSimulator) -> None:
    page = sim.page(host_of(sim, scheduler="k8s", mig=True), T0 + 3600)
    assert_same_shape(page, "a100_mig.prom")
    assert "DCGM_FI_DEV_GPU_UTIL" not in page
    assert page.count('GPU_I_ID="1"') == page.count('GPU_I_ID="2"') > 0


def test_every_family_prints_help_type_and_one_line_per_gpu(sim: FleetSimulator) -> None:
    host = host_of(sim, scheduler="k8s", mig=False)
    page = sim.page(host, T0 + 7200)
    assert page.endswith("\n") and not page.endswith("\n\n") and "\n\n" not in page
    families = {f.name: f for f in text_string_to_metric_families(page)}
    for field in EXPORTER_FIELDS:
        if field.name not in families:
            assert field.profiling, field.name  # only a paused profiler removes a family
            continue
        family = families[field.name]
        assert family.type == field.prom_type
        assert family.documentation == field.help
        assert len(family.samples) <= 8


def test_a_job_without_profiling_has_no_prof_lines_on_its_gpus(sim: FleetSimulator) -> None:
    job = next(
        j
        for j in sim.fleet.jobs
        if not j.scenario.profiling and not sim.hosts[j.placements[0].host].mig
    )  # a whole GPU: a MIG slice shares its UUID with the other slice, and has no GPU_UTIL
    placement = job.placements[0]
    host = sim.hosts[placement.host]
    page = sim.page(host, placement.start_s + 600)
    for unit in placement.units:
        uuid = sim.fleet.units[unit].uuid
        lines = [line for line in page.splitlines() if uuid in line]
        assert lines and not any(line.startswith("DCGM_FI_PROF_") for line in lines)
        assert any(line.startswith("DCGM_FI_DEV_GPU_UTIL") for line in lines)


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    def page(seed: int) -> str:
        other = FleetSimulator(FleetSpec(hosts=4, seed=seed), origin_s=T0, horizon_s=86_400)
        return other.page(other.hosts[0], T0 + 5000)

    assert page(3) == page(3)
    assert page(3) != page(4)


@pytest.mark.real_component("promtool")
@pytest.mark.parametrize("t", [T0 + 60, T0 + 40_000])
def test_promtool_accepts_every_page_with_only_the_real_samples_lint(
    sim: FleetSimulator, t: int
) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")

    def lint(text: str) -> set[str]:
        result = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
        )
        assert result.returncode in (0, 3), result.stdout + result.stderr  # 3: lint only
        out = (result.stdout + result.stderr).splitlines()
        return {re.sub(r"^[A-Z0-9_]+ ", "", line) for line in out if line.strip()}

    allowed = set().union(*(lint(p.read_text()) for p in sorted(DATA.glob("*.prom"))))
    for host in sim.hosts:
        assert lint(sim.page(host, t)) <= allowed, host.name
