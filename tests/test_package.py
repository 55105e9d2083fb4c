"""The package as users get it: a wheel and an sdist from ``python -m build`` install
into a clean virtual environment with the ``broker`` extra and run ``tickwheel serve``.

Slow (a build, a venv, two installs): pip takes dependencies from its cache, or PyPI.
The broker is checked through the wire (ApiVersions answers with no error) and stopped
by its PID with SIGTERM, as a service manager would.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.wire import WireClient
from tickwheel.protocol import ApiKey

ROOT = Path(__file__).resolve().parents[1]
API_VERSIONS = ApiKey.API_VERSIONS
BUILD_TIMEOUT_S = 120
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15
_CLIENT_SOFTWARE = {"client_software_name": "tickwheel-tests", "client_software_version": "1"}

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _run(*argv: str | Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        [str(arg) for arg in argv],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        env=None if env is None else {**os.environ, **env},
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_api_versions(bootstrap: str, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _, stderr = process.communicate()
            pytest.fail(f"tickwheel serve exited {process.returncode}: {stderr.decode()}")
        try:
            client = WireClient(bootstrap)
        except ConnectionRefusedError:
            time.sleep(0.05)  # not listening yet: poll with a deadline
            continue
        try:
            body = client.call(
                API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            )
        finally:
            client.close()
        return bool(body.error_code == 0 and body.api_keys)
    return False


def _serve_and_stop(venv: Path, log_dir: Path) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [
            str(venv / "bin" / "tickwheel"),
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={log_dir}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _answers_api_versions(f"127.0.0.1:{port}", process)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=STOP_TIMEOUT_S)
    assert process.returncode == 0, stderr.decode()


def test_wheel_and_sdist_install_into_a_clean_venv_and_serve(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, ROOT)
    (wheel,) = dist.glob("tickwheel-*.whl")
    (sdist,) = dist.glob("tickwheel-*.tar.gz")

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    pip = (
        venv / "bin" / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    )
    _run(*pip, f"{wheel}[broker]")
    assert not (venv / "bin" / "pytest").exists()  # the broker extra only, no dev tools
    _serve_and_stop(venv, tmp_path / "logs-wheel")

    # The sdist over the same environment: its dependencies are there already. The wheel
    # above proved the compiled core; this install proves the sdist builds and serves, on
    # the pure-Python core (a second mypyc compile would only cost the suite a minute).
    _run(*pip, "--force-reinstall", "--no-deps", sdist, env={"TICKWHEEL_NO_COMPILE": "1"})
    _serve_and_stop(venv, tmp_path / "logs-sdist")
