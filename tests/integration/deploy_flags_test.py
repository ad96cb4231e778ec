#!/usr/bin/env python3
"""The arbiterd command lines in deploy/ are ones this arbiterd accepts.

For each deployment - the Kubernetes DaemonSet's args, the container image's
CMD, the systemd unit's ExecStart and its documented ARBITERD_ARGS example -
runs the real arbiterd with exactly those flags plus an empty --listen (the
last value of a flag wins): flag parsing and log setup must pass (an unknown
flag or value stops arbiterd before it logs "arbiterd failed to start"), and
the start then fails on purpose, on the empty listener, before anything binds
a port or opens a device. Also checks that
deploy/README.md documents every flag arbiterd has, and names none it lacks.

Usage: deploy_flags_test.py ARBITERD
"""
import json
import pathlib
import re
import shlex
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def daemonset_args():
    for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "daemonset.yaml").read_text()):
        if not doc or doc.get("kind") != "DaemonSet":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            if container["name"] == "arbiterd":
                return container.get("args", [])
    raise SystemExit("deploy/kubernetes/daemonset.yaml: no arbiterd container")


def containerfile_args():
    text = (DEPLOY / "container" / "Containerfile").read_text().replace("\\\n", " ")
    match = re.search(r"^CMD\s+(\[.*\])\s*$", text, re.MULTILINE)
    if not match:
        raise SystemExit("deploy/container/Containerfile: no exec-form CMD")
    return json.loads(match.group(1))


def systemd_args():
    text = (DEPLOY / "systemd" / "arbiterd.service").read_text()
    joined = text.replace("\\\n", " ")
    match = re.search(r"^ExecStart=\S+\s+(.*)$", joined, re.MULTILINE)
    if not match:
        raise SystemExit("deploy/systemd/arbiterd.service: no ExecStart")
    args = [a for a in shlex.split(match.group(1)) if not a.startswith("$")]
    example = re.search(r'ARBITERD_ARGS="([^"]+)"', text)
    return args, shlex.split(example.group(1)) if example else []


def known_flags(arbiterd):
    """arbiterd's own flags (those defined in server/main.cc), dashed."""
    help_text = subprocess.run([arbiterd, "--helpfull"], capture_output=True, text=True).stdout
    section = help_text.split("server/main.cc:", 1)
    if len(section) != 2:
        raise SystemExit("arbiterd --helpfull lists no flags from server/main.cc")
    own = section[1].split("\n\n", 1)[0]
    return {name.replace("_", "-") for name in re.findall(r"^\s+--([a-z0-9_]+)", own, re.MULTILINE)}


def check_accepted(arbiterd, name, args):
    """True when arbiterd parses `args` and gets as far as starting."""
    run = subprocess.run([arbiterd, *args, "--listen="], capture_output=True, text=True,
                         timeout=60)
    output = run.stdout + run.stderr
    if run.returncode == 1 and "arbiterd failed to start" in output and "listen: empty" in output:
        print(f"ok    {name}: {' '.join(args)}")
        return True
    print(f"FAIL  {name}: {' '.join(args)}\n      exit {run.returncode}: {output.strip()}")
    return False


def main():
    arbiterd = sys.argv[1]
    unit, unit_example = systemd_args()
    ok = all([
        check_accepted(arbiterd, "kubernetes/daemonset.yaml", daemonset_args()),
        check_accepted(arbiterd, "container/Containerfile CMD", containerfile_args()),
        check_accepted(arbiterd, "systemd/arbiterd.service ExecStart", unit),
        check_accepted(arbiterd, "systemd/arbiterd.service ARBITERD_ARGS example", unit + unit_example),
    ])

    flags = known_flags(arbiterd)
    readme = (DEPLOY / "README.md").read_text()
    table = set(re.findall(r"^\| `--([a-z0-9-]+)", readme, re.MULTILINE))
    undocumented = sorted(flags - table)
    unknown = sorted(table - flags)
    if undocumented or unknown:
        ok = False
        print(f"FAIL  deploy/README.md flag table: missing {undocumented}, not arbiterd flags {unknown}")
    else:
        print(f"ok    deploy/README.md documents all {len(flags)} arbiterd flags")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
