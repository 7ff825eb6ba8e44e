"""The deployment files as an operator installs them: the systemd units pass
`systemd-analyze verify` (and the check catches a bad unit), and the compose file runs
PostgreSQL, Redis, the web server, two workers and the sweeper from the one image. (The image
itself is built and smoke-tested by deploy/check-image, a stage of .ci/run.)"""

from __future__ import annotations

import shutil
import subprocess

import yaml

from tests.conftest import ROOT

UNITS = ROOT / "deploy" / "systemd"


def _verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(UNITS / "verify"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_service_units_pass_systemd_analyze_verify():
    result = _verify()
    assert result.returncode == 0, result.stderr
    for unit in ("harness-web.service", "harness-worker@1.service", "harness-sweep.service"):
        assert unit in result.stdout


def test_the_unit_check_fails_on_a_unit_systemd_would_ignore_part_of(tmp_path):
    for unit in UNITS.glob("*.service"):
        shutil.copy(unit, tmp_path)
    web = tmp_path / "harness-web.service"
    web.write_text(web.read_text().replace("Restart=on-failure", "Restart=on-failure\nRestarts=2"))
    result = _verify(str(tmp_path))
    assert result.returncode == 1
    assert "Restarts" in result.stderr


def test_compose_runs_the_stack_from_the_one_image_with_its_configuration():
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    commands = {name: (service.get("command") or [""])[0] for name, service in services.items()}
    assert sorted(commands.values()).count("worker") == 2
    assert {"web", "sweep"} <= set(commands.values())
    assert {"postgres", "redis"} <= set(services)
    harness = [name for name, command in commands.items() if command in ("web", "worker", "sweep")]
    for name in harness:
        assert services[name]["build"]["dockerfile"] == "deploy/Containerfile"
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(services[name]["environment"])
    assert any("/readyz" in part for part in services["web"]["healthcheck"]["test"])
