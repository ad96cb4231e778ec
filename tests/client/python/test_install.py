"""`pip install ./client/python` works offline and the installed package talks to the daemon."""

import os
import shutil
import subprocess
import sys

from conftest import REPO


def test_pip_installs_offline_with_stubs_from_the_repositorys_proto(tmp_path, daemon):
    # A copy of the two folders the package is built from, so pip's build leaves nothing in the checkout.
    tree = tmp_path / "repo"
    shutil.copytree(os.path.join(REPO, "client", "python"), tree / "client" / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    shutil.copytree(os.path.join(REPO, "proto"), tree / "proto", ignore=shutil.ignore_patterns("CMakeLists.txt"))
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PIP_FIND_LINKS", None)
    env.pop("PYTHONPATH", None)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                          str(tree / "client" / "python")], env=env, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    check = ("import sys, arbiter; from arbiter.v1 import arbiter_pb2; "
             "print(arbiter.__file__); print(arbiter.Client(sys.argv[1]).health())")
    run = subprocess.run([sys.executable, "-c", check, daemon.address], env=dict(env, PYTHONPATH=str(target)),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    where, health = run.stdout.split()
    assert where.startswith(str(target)) and health == "SERVING"
