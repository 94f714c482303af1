"""The distribution is ours: its registry name is `sentropic-engram-memory` (`engram-memory` on the registry is
an unrelated project), the command stays `engram-memory` and the package `engram_memory`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from engram_memory import __version__

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "sentropic-engram-memory"


def test_the_project_is_named_ours_and_keeps_its_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert project["version"] == __version__
    assert project["scripts"] == {"engram-memory": "engram_memory.host.cli.app:main"}


@pytest.mark.slow
def test_a_built_wheel_installs_alone_and_its_command_answers_version(tmp_path: Path) -> None:
    """As `pipx install FILE` does: a fresh virtual environment, the wheel and its dependencies, the command."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)],
        check=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith("sentropic_engram_memory-" + __version__)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"sentropic_engram_memory-{__version__}.dist-info/METADATA").decode()
    assert f"Name: {DISTRIBUTION}\n" in metadata
    assert "engram_memory/embeddings/data/minilm-tokenizer.json" in names  # data ships inside the package
    assert {
        "engram_memory/embeddings/data/e5-centroids.json",
        "engram_memory/embeddings/data/calibration-sentences.json",
    } <= set(names)
    assert any(name.startswith("engram_memory/stores/sqlite/migrations/") for name in names)
    target = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True, timeout=1200)
    done = subprocess.run(
        [str(target / "bin" / "engram-memory"), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"engram-memory {__version__}\n", "")
