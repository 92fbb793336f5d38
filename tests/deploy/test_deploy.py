"""What ``deploy/`` ships is valid for the tools that will read it (issue 15, Deploy):
the image recipe passes hadolint, the manifests validate against the Kubernetes schemas
(``kubernetes-validate``, its offline schemas), the unit passes ``systemd-analyze verify``,
every flag they pass exists in ``qrmd run --help`` and their settings load; and the package
built as a wheel runs from a fresh virtualenv (the image's own install step, without an engine).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from qrmd.cli import build_parser
from qrmd.config import config_from_args, environment_values, load_config

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.30.0"  # the oldest release the manifest's fields need


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is not installed: it is in the test extra (make venv)"
    return found


def run_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    return {s for action in run._actions for s in action.option_strings}


def manifests() -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "daemonset.yaml").read_text()) if d]


def daemonset_args() -> list[str]:
    (ds,) = [d for d in manifests() if d["kind"] == "DaemonSet"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    return list(container["args"])


def unit_exec_start() -> list[str]:
    line = next(
        line
        for line in (DEPLOY / "qrmd.service").read_text().splitlines()
        if line.startswith("ExecStart=")
    )
    return shlex.split(line.removeprefix("ExecStart="))


def test_the_image_recipe_passes_hadolint() -> None:
    done = subprocess.run(
        [tool("hadolint"), "--failure-threshold", "info", str(DEPLOY / "Dockerfile")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_recipe_is_multi_stage_and_ends_unprivileged() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM ", text, re.MULTILINE)
    assert len(stages) == 2
    final = text.rsplit("\nFROM ", 1)[1]
    assert "USER 10001" in final and "--no-cache-dir" in final
    assert not re.search(r"apt-get|gcc|build-essential|COPY (?!--from)", final)


def test_the_manifests_validate_against_the_kubernetes_schemas() -> None:
    done = subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION,
         str(DEPLOY / "daemonset.yaml")],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert {d["kind"] for d in manifests()} == {
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet",
    }  # fmt: skip


def test_the_daemonset_pod_is_admitted_without_a_cpu_plugin() -> None:
    (ds,) = [d for d in manifests() if d["kind"] == "DaemonSet"]
    template = ds["spec"]["template"]  # type: ignore[index]
    assert template["metadata"]["annotations"]["katalyst.kubewharf.io/skip_qrm_admit"] == "true"
    (container,) = template["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify checks that ExecStart's program exists: point it at this checkout's qrmd.
    unit = tmp_path / "qrmd.service"
    text = (DEPLOY / "qrmd.service").read_text()
    unit.write_text(text.replace("/opt/qrmd/bin/qrmd", tool("qrmd")))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and not done.stderr.strip(), done.stdout + done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(daemonset_args(), id="every daemonset flag exists in qrmd run"),
        pytest.param(unit_exec_start()[1:], id="every systemd unit flag exists in qrmd run"),
    ],
)
def test_every_flag_used_exists(argv: list[str]) -> None:
    assert argv[0] == "run"
    used = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    assert used - run_flags() == set()


def test_the_settings_shipped_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (config_map,) = [d for d in manifests() if d["kind"] == "ConfigMap"]
    config_file = tmp_path / "qrmd.yaml"
    config_file.write_text(config_map["data"]["qrmd.yaml"])  # type: ignore[index]
    env = {"NODE_NAME": "node-1", "HOST_IP": "10.0.0.5", "POD_IP": "10.1.0.7"}
    argv = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in daemonset_args()]
    argv = [a.replace("/etc/qrmd/qrmd.yaml", str(config_file)) for a in argv]
    monkeypatch.setenv("NODE_NAME", "node-1")
    config = config_from_args(build_parser().parse_args(argv))
    assert config.metrics_address == ("10.1.0.7", 9316)
    assert config.pod_source.enabled
    # The sample file leaves the node's address to the node: a flag, or QRMD_NODE_ADDRESS.
    sample = load_config({}, str(DEPLOY / "qrmd.yaml"), environment_values(env_for_unit()))
    assert sample.state_dir == "/var/lib/qrmd" and sample.pod_source.enabled


def env_for_unit() -> dict[str, str]:
    return {"QRMD_NODE_ADDRESS": "10.0.0.5"}


@pytest.mark.slow
def test_the_wheel_installs_and_runs_from_a_fresh_virtualenv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(wheels), str(REPO)],
        check=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = wheels.glob("qrmd-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    # The dependencies come from this environment's site-packages (no index here); a plain
    # path entry, so the checkout's editable install (a .pth hook there) is not picked up.
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=120,
    )  # fmt: skip
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    where = subprocess.run(
        [str(python), "-c", "import qrmd; print(qrmd.__file__)"],
        check=True, capture_output=True, text=True, env=env, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv)), where
    version = subprocess.run(
        [str(venv / "bin" / "qrmd"), "--version"],
        check=True, capture_output=True, text=True, env=env, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert re.fullmatch(r"qrmd \d+\.\d+\.\d+\n", version), version
    demo = subprocess.run(
        [str(venv / "bin" / "qrmd"), "demo", "--fast"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
