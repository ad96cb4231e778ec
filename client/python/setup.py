"""Builds the arbiter package: its Python sources plus stubs generated from the proto.

The stubs are generated here, at build time, by Debian's protoc and grpc_python_plugin
(packages protobuf-compiler and protobuf-compiler-grpc), never committed. Not by
grpc_tools.protoc: the protoc bundled in Debian's python3-grpc-tools writes code that
newer protobuf runtimes refuse, while protoc 3.21's loads on old and new alike.

The wire contract lives outside this folder, in the repository's proto/ (two levels
up); ARBITER_PROTO_DIR overrides where to find arbiter/v1/arbiter.proto, and PROTOC and
GRPC_PYTHON_PLUGIN which tools run.

There is deliberately no pyproject.toml: with one, pip builds in an isolated
environment and downloads setuptools into it, which fails offline. Without it, pip
builds with the setuptools and wheel already installed (python3-setuptools,
python3-wheel), e.g. `python3 -m pip install --no-deps --target DIR ./client/python`.
The build tree's copy (build/python) is `setup.py build_py --build-lib DIR`.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = "arbiter/v1/arbiter.proto"


def _proto_root():
    candidates = [os.environ.get("ARBITER_PROTO_DIR"), os.path.join(HERE, "..", "..", "proto")]
    for root in candidates:
        if root and os.path.isfile(os.path.join(root, PROTO)):
            return os.path.abspath(root)
    searched = " or ".join(filter(None, candidates))
    raise SystemExit("arbiter: cannot find %s under %s: build from the repository's client/python, or set "
                     "ARBITER_PROTO_DIR to the folder holding arbiter/v1/" % (PROTO, searched))


def _tool(variable, name, package):
    path = os.environ.get(variable) or shutil.which(name)
    if not path:
        raise SystemExit("arbiter: %s not found: install Debian's %s (or set %s)" % (name, package, variable))
    return path


def generate_stubs(out_dir):
    """arbiter/v1/arbiter_pb2{,_grpc}.py and arbiter/health_pb2.py under out_dir."""
    protoc = _tool("PROTOC", "protoc", "protobuf-compiler")
    plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin", "protobuf-compiler-grpc")
    root = _proto_root()
    os.makedirs(out_dir, exist_ok=True)
    runs = [
        [protoc, "-I" + root, "--python_out=" + out_dir, "--grpc_out=" + out_dir,
         "--plugin=protoc-gen-grpc=" + plugin, os.path.join(root, PROTO)],
        [protoc, "-I" + HERE, "--python_out=" + out_dir, os.path.join(HERE, "arbiter", "health.proto")],
    ]
    for command in runs:
        subprocess.run(command, check=True)
    with open(os.path.join(out_dir, "arbiter", "v1", "__init__.py"), "w") as f:
        f.write('"""Stubs generated from %s at build time."""\n' % PROTO)


class BuildPyWithStubs(build_py):
    """build_py, then the generated stubs next to the sources in the build directory."""

    def run(self):
        super().run()
        generate_stubs(self.build_lib)


setup(
    name="arbiter-client",
    version="0.1.0",
    description="Python client for arbiterd, Arbiter's matmul kernel-selection daemon",
    packages=["arbiter"],
    python_requires=">=3.9",
    install_requires=["grpcio", "protobuf>=3.20", "numpy"],
    extras_require={"torch": ["torch"], "bf16": ["ml_dtypes"], "progress": ["tqdm"]},
    cmdclass={"build_py": BuildPyWithStubs},
)
