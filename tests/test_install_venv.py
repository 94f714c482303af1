"""`.ci/install-venv` gives uv exactly pip's package sources and choice rule."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "install-venv"


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("install_venv", str(SCRIPT))
    spec = importlib.util.spec_from_loader("install_venv", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


LISTED = """\
:env:.find-links='/opt/wheels-from-env'
:env:.disable-pip-version-check='1'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
global.index-url='https://mirror.example/simple'
"""


def test_uv_is_given_pips_sources_with_the_environment_winning_over_a_file() -> None:
    script = _script()
    settings = script.parse_settings(LISTED)
    assert settings["find-links"] == "/opt/wheels-from-env"
    assert settings["cert"] == "/etc/ssl/certs/ca-certificates.crt"
    assert script.uv_arguments(settings) == [
        "--index-strategy",
        "unsafe-best-match",
        "--index-url",
        "https://mirror.example/simple",
        "--extra-index-url",
        "file:///opt/pypi/simple",
        "--extra-index-url",
        "file:///opt/pypi-more/simple",
        "--find-links",
        "/opt/wheels-from-env",
    ]


def test_no_pip_configuration_leaves_uv_on_its_defaults() -> None:
    script = _script()
    assert script.uv_arguments(script.parse_settings("")) == ["--index-strategy", "unsafe-best-match"]
