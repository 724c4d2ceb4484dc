"""The learner's path from the README: make the student edition, open it in JupyterLab.

    python -m course_lib.edition notebooks my-course && jupyter lab my-course/

The test runs that command's second half as a learner would (the `jupyter` found beside
this Python, no browser, a free localhost port) and asks the server, through its REST API,
for what the learner sees: the eleven notebooks of the student edition, each with its
solutions stripped, the Lab page, and the widget extension that draws the sliders.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_lib.instructor.edition import make_student_edition

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
JUPYTER = Path(sys.executable).with_name("jupyter")
TOKEN = "course-test-token"

pytestmark = pytest.mark.skipif(
    shutil.which("jupyter-lab", path=str(JUPYTER.parent)) is None,
    reason="JupyterLab is not installed beside this Python (requirements.txt pins it)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabURL(str):
    """The server's base URL, which also knows the server's runtime folder."""


def get(url, timeout=5):
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read().decode("utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on the student edition; yields its base URL, stops it after."""
    home = tmp_path_factory.mktemp("home")
    course = home / "my-course"
    make_student_edition(ROOT / "notebooks", course, verbose=False)
    port = free_port()
    env = {**os.environ, "HOME": str(home), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTER_CONFIG_DIR": str(home / "config")}
    server = subprocess.Popen(
        [str(JUPYTER), "lab", str(course), "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", "--ServerApp.port_retries=0",
         "--allow-root"],     # CI's containers run as root
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = LabURL(f"http://127.0.0.1:{port}")
    base.runtime_dir = env["JUPYTER_RUNTIME_DIR"]
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{server.stdout.read()}")
            try:
                get(f"{base}/api/status", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("jupyter lab did not answer within 60 s")
                time.sleep(0.3)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_it_serves_the_student_editions_notebooks(lab):
    status, body = get(f"{lab}/api/contents")
    listed = sorted(item["name"] for item in json.loads(body)["content"]
                    if item["type"] == "notebook")
    assert status == 200 and listed == NOTEBOOKS
    _, body = get(f"{lab}/api/contents/{NOTEBOOKS[0]}")
    cells = json.loads(body)["content"]["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "NotImplementedError" in code and "### BEGIN SOLUTION" not in code
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code")


def test_the_lab_page_loads_with_the_widget_extension(lab):
    status, page = get(f"{lab}/lab")
    assert status == 200 and "JupyterLab" in page
    # the page's configuration lists the prebuilt extensions the browser will load
    assert "@jupyter-widgets/jupyterlab-manager" in page


def test_a_kernel_it_starts_imports_course_lib(lab):
    """Start a kernel as the Lab page does, then run a cell in it (over the connection file
    the server writes in its runtime folder)."""
    from jupyter_client import BlockingKernelClient

    request = urllib.request.Request(f"{lab}/api/kernels", method="POST", data=b"{}",
                                     headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        kernel_id = json.loads(response.read())["id"]
    runtime = Path(lab.runtime_dir)
    client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        out = []
        reply = client.execute_interactive(
            "import sys, course_lib, ipywidgets; print(sys.executable)",
            output_hook=lambda msg: out.append(msg["content"].get("text", "")), timeout=60)
    finally:
        client.stop_channels()
    assert reply["content"]["status"] == "ok"
    assert Path("".join(out).strip()).resolve() == Path(sys.executable).resolve()
