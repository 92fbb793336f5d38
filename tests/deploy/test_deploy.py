"""What ``deploy/`` ships is valid for the tools that will read it (docs/running.md, Install):
the image recipe passes hadolint, the manifests validate against the Kubernetes schemas
(``kubernetes-validate``, its offline schemas), the unit passes ``systemd-analyze verify``,
every flag they pass exists in ``qrmd run --help`` and their settings load; and the package
built as a wheel runs from a fresh virtualenv (the image's own install step, without an engine).
What they grant is checked against what qrmd does: ``tests/deploy/test_privileges.py``.
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
from typing import Any

import pytest
import yaml

from qrmd.cli import build_parser
from qrmd.config import DaemonConfig, config_from_args, environment_values, load_config

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
#: The oldest release the manifests' fields need, and the newest the validator knows.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
#: The DaemonSet bundles: with the memory balancer, and the CPU plugin alone. Apply one.
BUNDLES = ("daemonset.yaml", "daemonset-cpu-only.yaml")
#: Opt-in RBAC for kubelets without fine-grained authorization (its own comments say why).
NODES_PROXY_RBAC = "rbac-nodes-proxy.yaml"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is not installed: it is in the test extra (make venv)"
    return found


def run_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    return {s for action in run._actions for s in action.option_strings}


def manifests(name: str = "daemonset.yaml") -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def daemonset_args(name: str = "daemonset.yaml") -> list[str]:
    (ds,) = [d for d in manifests(name) if d["kind"] == "DaemonSet"]
    (container,) = ds["spec"]["template"]["spec"]["containers"]
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


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_manifests_validate_against_the_kubernetes_schemas(version: str) -> None:
    files = [str(DEPLOY / name) for name in (*BUNDLES, NODES_PROXY_RBAC)]
    done = subprocess.run(
        [tool("kubernetes-validate"), "--strict", "-k", version, *files],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for bundle in BUNDLES:
        assert {d["kind"] for d in manifests(bundle)} == {
            "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet",
        }  # fmt: skip
    assert {d["kind"] for d in manifests(NODES_PROXY_RBAC)} == {"ClusterRole", "ClusterRoleBinding"}


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_daemonset_pod_is_admitted_without_a_cpu_plugin(bundle: str) -> None:
    (ds,) = [d for d in manifests(bundle) if d["kind"] == "DaemonSet"]
    template = ds["spec"]["template"]
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
        pytest.param(
            daemonset_args("daemonset-cpu-only.yaml"),
            id="every cpu-only daemonset flag exists in qrmd run",
        ),
        pytest.param(unit_exec_start()[1:], id="every systemd unit flag exists in qrmd run"),
    ],
)
def test_every_flag_used_exists(argv: list[str]) -> None:
    assert argv[0] == "run"
    used = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    assert used - run_flags() == set()


def daemonset_config(bundle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DaemonConfig:
    """The settings a bundle's pod runs with: its ConfigMap, its args, the downward API."""
    (config_map,) = [d for d in manifests(bundle) if d["kind"] == "ConfigMap"]
    config_file = tmp_path / "qrmd.yaml"
    config_file.write_text(config_map["data"]["qrmd.yaml"])
    env = {"NODE_NAME": "node-1", "HOST_IP": "10.0.0.5", "POD_IP": "10.1.0.7"}
    argv = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in daemonset_args(bundle)]
    argv = [a.replace("/etc/qrmd/qrmd.yaml", str(config_file)) for a in argv]
    monkeypatch.setenv("NODE_NAME", "node-1")
    return config_from_args(build_parser().parse_args(argv))


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_settings_shipped_load(
    bundle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = daemonset_config(bundle, tmp_path, monkeypatch)
    assert config.metrics_address == ("10.1.0.7", 9316)
    assert config.pod_source.enabled
    # The token goes only to a kubelet whose certificate the pod's CA file signed.
    assert config.pod_source.kubelet_ca_file == f"{SERVICE_ACCOUNT_DIR}/ca.crt"
    assert config.takeover.import_if_present


def test_the_sample_file_loads() -> None:
    # The sample file leaves the node's address to the node: a flag, or QRMD_NODE_ADDRESS.
    env = {"QRMD_NODE_ADDRESS": "10.0.0.5"}
    sample = load_config({}, str(DEPLOY / "qrmd.yaml"), environment_values(env))
    assert sample.state_dir == "/var/lib/qrmd" and sample.pod_source.enabled
    assert sample.pod_source.kubelet_ca_file is not None


def unit_environment(extra: dict[str, str]) -> dict[str, str]:
    """The unit's Environment= values, overlaid by /etc/default/qrmd's (systemd.exec(5):
    EnvironmentFile= settings override Environment=)."""
    env: dict[str, str] = {}
    for line in (DEPLOY / "qrmd.service").read_text().splitlines():
        if line.startswith("Environment="):
            env.update(
                pair.split("=", 1) for pair in shlex.split(line.removeprefix("Environment="))
            )
    return env | extra


@pytest.mark.parametrize(
    ("default_file", "pod_source"),
    [
        pytest.param({}, "none", id="a bare node reads no pods: no token, no read-only port"),
        pytest.param(
            {"QRMD_POD_SOURCE": "kubelet", "QRMD_NODE_ADDRESS": "10.0.0.5"},
            "kubelet",
            id="etc default qrmd turns the pod source on",
        ),
    ],
)
def test_the_unit_settings_load(default_file: dict[str, str], pod_source: str) -> None:
    env = unit_environment(default_file)
    argv = unit_exec_start()[1:]
    config = config_from_args_with_env(argv, env)
    assert config.pod_source.kind == pod_source
    assert config.metrics_address == ("127.0.0.1", 9316)


def config_from_args_with_env(argv: list[str], env: dict[str, str]) -> DaemonConfig:
    argv = [a.replace("/etc/qrmd/qrmd.yaml", str(DEPLOY / "qrmd.yaml")) for a in argv]
    args = build_parser().parse_args(argv)
    flags = {k.replace("_", "-"): v for k, v in vars(args).items() if k not in ("run", "command")}
    flags.pop("config", None)
    return load_config(flags, str(DEPLOY / "qrmd.yaml"), environment_values(env))


def unit_read_write_paths() -> list[str]:
    for line in (DEPLOY / "qrmd.service").read_text().splitlines():
        if line.startswith("ReadWritePaths="):
            return line.removeprefix("ReadWritePaths=").split()
    raise AssertionError("no ReadWritePaths=")


@pytest.mark.parametrize(
    ("path", "required"),
    [
        pytest.param("/var/lib/qrmd", True, id="the state directory is systemd's own"),
        pytest.param("/var/lib/kubelet/plugins_registry", False,
                     id="kubelet's plugin directory may not exist yet"),
        pytest.param("/var/lib/katalyst", False, id="a node without katalyst has no katalyst"),
        pytest.param("/sys/fs/cgroup", False, id="the cgroup root is optional too"),
    ],
)  # fmt: skip
def test_the_unit_starts_where_an_optional_path_is_missing(path: str, required: bool) -> None:
    # A ReadWritePaths= entry without "-" that does not exist fails the start (systemd.exec(5)).
    listed = unit_read_write_paths()
    assert (path in listed) == required and (f"-{path}" in listed) != required
    if required:
        state_directory = re.search(
            r"^StateDirectory=(\S+)$", (DEPLOY / "qrmd.service").read_text(), re.M
        )
        assert state_directory and path == f"/var/lib/{state_directory.group(1)}"


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
