"""Fixtures: real arbiterd processes on the CPU backend, each with a temporary store.

ARBITERD names the binary (ctest sets it; else build/bin/arbiterd of this checkout).
arbiter must be importable: ctest puts build/python on PYTHONPATH.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ARBITERD = os.environ.get("ARBITERD") or os.path.join(REPO, "build", "bin", "arbiterd")
STARTUP_SECONDS = 120  # registry verification and store open, on a loaded 2-core CI machine


class Daemon:
    """arbiterd in a subprocess. listen: "unix" (a socket in a temp dir) or "tcp" (127.0.0.1, a free port).

    With token, the daemon requires it for admin RPCs (--admin-token-file) and .token_file holds it.
    """

    def __init__(self, listen="unix", args=(), token=None):
        if not os.access(ARBITERD, os.X_OK):
            pytest.fail("no arbiterd at %s: build it, or set ARBITERD" % ARBITERD)
        # A short path of its own: Unix socket paths are limited to ~107 bytes.
        self.work = tempfile.mkdtemp(prefix="arbiter-py-")
        args = list(args)
        self.token_file = None
        if token is not None:
            self.token_file = os.path.join(self.work, "token")
            with open(self.token_file, "w") as f:
                f.write(token + "\n")
            args.append("--admin-token-file=" + self.token_file)
        port_file = os.path.join(self.work, "port")
        if listen == "unix":
            self.address = "unix:" + os.path.join(self.work, "arbiterd.sock")
            flag = self.address
        else:
            flag = "127.0.0.1:0"
        self.log_path = os.path.join(self.work, "arbiterd.log")
        self._log = open(self.log_path, "w")
        self._argv = [ARBITERD, "--listen=" + flag, "--port-file=" + port_file, "--backend=cpu",
                      "--store=" + os.path.join(self.work, "verdicts.db"),
                      # arbiterd's SIGTERM sometimes waits out its whole grace (10 s by default) after a
                      # call whose deadline had expired, or a large response on a Unix socket; these tests
                      # finish their calls before stopping a daemon, so a short grace keeps the suite fast.
                      "--shutdown-grace-seconds=1"] + list(args)
        self._port_file = port_file
        self.process = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT)
        bound = self._wait_for(port_file)  # the TCP port, or the unix address
        if listen != "unix":
            self.address = "127.0.0.1:%d" % int(bound)

    def _wait_for(self, port_file):
        """The daemon writes its port file once it serves; polled, bounded by STARTUP_SECONDS."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("arbiterd exited with %d before serving:\n%s"
                                   % (self.process.returncode, self.log_tail()))
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return text
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        raise RuntimeError("arbiterd did not serve within %d s:\n%s" % (STARTUP_SECONDS, self.log_tail()))

    def restart(self):
        """Stops arbiterd and starts it again with the same flags (a unix: daemon keeps its address):
        every session, region and tensor of the old one is forgotten."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        os.remove(self._port_file)
        self.process = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_for(self._port_file)

    def log_tail(self, lines=20):
        self._log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    """One daemon for the dispatch tests: Unix socket, no token (admin allowed: the listener is local)."""
    d = Daemon("unix")
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    import arbiter
    with arbiter.Client(daemon.address) as c:
        yield c


ADMIN_TOKEN = "py-client-test-token-3f9c2a"


@pytest.fixture(scope="session")
def guarded_daemon():
    """A daemon on TCP 127.0.0.1 whose admin RPCs need ADMIN_TOKEN (.token_file holds it)."""
    d = Daemon("tcp", token=ADMIN_TOKEN)
    yield d
    d.stop()
