"""The installed version, read from the first qrmd metadata directory on sys.path
(qrmd/version.py)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from qrmd import version
from qrmd.version import installed_version


def _metadata_dir(root: Path, name: str, file: str, text: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / file).write_text(text)
    return root


@pytest.mark.parametrize(
    ("name", "file", "text", "want"),
    [
        pytest.param(
            "qrmd-1.2.3.dist-info",
            "METADATA",
            "Metadata-Version: 2.4\nName: qrmd\nVersion: 1.2.3\n\nVersion: 9\n",
            "1.2.3",
            id="a wheel's dist-info gives its Version header",
        ),
        pytest.param(
            "qrmd-0.1.dev0.egg-info",
            "PKG-INFO",
            "Metadata-Version: 2.1\nName: qrmd\nversion:  0.1.dev0 \n",
            "0.1.dev0",
            id="an egg-info gives its PKG-INFO's version",
        ),
        pytest.param(
            "qrmd.egg-info",
            "PKG-INFO",
            "Metadata-Version: 2.1\nName: qrmd\nVersion: 0.3\n",
            "0.3",
            id="a development egg-info without a version in its name gives its version",
        ),
        pytest.param(
            "QRMD-2.0.dist-info",
            "METADATA",
            "Name: QRMD\nVersion: 2.0\n",
            "2.0",
            id="the name is matched whatever its case",
        ),
    ],
)
def test_the_first_metadata_directory_on_the_path_gives_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, file: str, text: str, want: str
) -> None:
    first = _metadata_dir(tmp_path / "first", name, file, text)
    later = _metadata_dir(tmp_path / "later", "qrmd-7.7.dist-info", "METADATA", "Version: 7.7\n")
    monkeypatch.setattr("sys.path", [str(tmp_path / "missing"), str(first), str(later)])
    assert installed_version() == want


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        pytest.param("3.1.4", "3.1.4", id="importlib.metadata is asked when no directory is found"),
        pytest.param(None, None, id="not installed at all is None"),
    ],
)
def test_without_a_metadata_directory_importlib_metadata_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str | None, want: str | None
) -> None:
    _metadata_dir(tmp_path, "qrmdx-1.0.dist-info", "METADATA", "Version: 1.0\n")

    def lookup(name: str) -> str:
        assert name == "qrmd"
        if answer is None:
            raise metadata.PackageNotFoundError(name)
        return answer

    monkeypatch.setattr("sys.path", [str(tmp_path)])
    monkeypatch.setattr(metadata, "version", lookup)
    assert installed_version() == want


def test_the_version_is_what_importlib_metadata_reports() -> None:
    assert metadata.version("qrmd") == version.VERSION
