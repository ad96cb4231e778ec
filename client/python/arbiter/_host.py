"""Host buffers: host shared memory registered with the daemon, so numpy operands cross no socket.

Same node, over a unix: address (the buffer is a region of the client's session,
arbiter._session). A buffer is a memfd sealed against shrinking, mapped here and by the
daemon (REGION_KIND_HOST_MEMFD): a CPU daemon's kernels read and write it in place; a
CUDA daemon page-locks it once and copies A and B from it to its GPU and C back by DMA
(README.md, "Operands on the device"). Arrays handed out by HostBuffer.array live in it;
Client.matmul sends arrays that do by reference (region and offset) instead of as bytes.

Ordering: the daemon reads A and B during the call and C is in place when it returns,
so the arrays must not change while a matmul that names them runs (another thread).

Thread-safe: a buffer's allocation takes a lock; the memory is the caller's to order.
"""

import concurrent.futures
import fcntl
import math
import mmap
import operator
import os
import threading

import grpc
import numpy as np

from arbiter import dtypes
from arbiter._session import Session, fd_socket_path
from arbiter.errors import error_for, invalid_argument
from arbiter.v1 import arbiter_pb2 as pb

ALIGNMENT = 256  # the daemon's operand alignment: every array starts on it


def align_up(offset):
    """The first ALIGNMENT boundary at or past offset."""
    return -(-offset // ALIGNMENT) * ALIGNMENT


# One thread's copy moves ~4-5 GB/s (bound by its outstanding misses, not by memory bandwidth): large
# copies are split over a few threads, numpy releasing the GIL inside each part.
_COPY_PART_BYTES = 1 << 20
_COPY_THREADS = max(1, min(8, os.cpu_count() or 1))
_copy_pool = None
_copy_pool_lock = threading.Lock()


def copy_bytes(dst, src):
    """dst[:] = src for two 1-D uint8 arrays of one length, in parts over up to 8 threads when large."""
    global _copy_pool
    n = src.nbytes
    parts = min(_COPY_THREADS, n // _COPY_PART_BYTES)
    if parts < 2:
        dst[:] = src
        return
    with _copy_pool_lock:
        if _copy_pool is None:
            _copy_pool = concurrent.futures.ThreadPoolExecutor(_COPY_THREADS, thread_name_prefix="arbiter-copy")
        pool = _copy_pool
    bounds = [n * i // parts for i in range(parts + 1)]

    def part(i):
        dst[bounds[i]:bounds[i + 1]] = src[bounds[i]:bounds[i + 1]]

    futures = [pool.submit(part, i) for i in range(1, parts)]
    part(0)  # the caller's share
    for f in futures:
        f.result()


def session(client, method):
    """The client's session, opened on the fd socket if it has none yet."""
    with client._session_lock:
        if client._session is None:
            path = fd_socket_path(client.address)
            if path is None:
                raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                                "host buffers are shared memory, which belongs to a session on the daemon's Unix "
                                "socket: connect with arbiter.Client(\"unix:/path/to/arbiter.sock\") on the daemon's "
                                "node, not %s (or pass arrays, sent as bytes)" % client.address, method)
            client._session = Session(path, method)
        return client._session


def _numpy_dtype(dtype, method):
    try:
        name = dtypes.normalize(dtype)
    except ValueError as e:
        raise invalid_argument(method, str(e)) from None
    if name == "bf16":
        return dtypes.BFLOAT16 if dtypes.BFLOAT16 is not None else np.dtype("<u2")  # bf16 bits without ml_dtypes
    return dtypes.NUMPY[name]


class HostBuffer:
    """nbytes of host memory shared with the daemon as one region; arrays are carved out of it.

    Made by Client.host_buffer. .region is the daemon's region id. close() (or the
    client's close, or the process's exit) releases it on the daemon's side.
    """

    def __init__(self, client, nbytes, label):
        method = "RegisterRegion"
        try:
            nbytes = operator.index(nbytes)
        except TypeError:
            raise invalid_argument(method, "nbytes=%r: expected an integer" % (nbytes,)) from None
        if nbytes < 1:
            raise invalid_argument(method, "nbytes=%d: expected at least 1" % nbytes)
        fd_session = session(client, method)
        fd = os.memfd_create("arbiter-host-buffer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # never truncated under a kernel
            self._map = mmap.mmap(fd, nbytes)
            number = fd_session.pass_fd(fd, method)
        finally:
            os.close(fd)  # the mapping and the daemon's copy keep the memory
        request = pb.RegisterRegionRequest(kind=pb.REGION_KIND_HOST_MEMFD, bytes=nbytes, fd=number, label=label)
        self.region = client._call(method, client._dispatch.RegisterRegion, request).region.id
        self.nbytes = nbytes
        self._bytes = np.frombuffer(self._map, dtype=np.uint8)
        self.address = self._bytes.ctypes.data
        self._client = client
        self._lock = threading.Lock()
        self._next = 0
        self._closed = False

    def __repr__(self):
        return "HostBuffer(region=%r, nbytes=%d, used=%d)" % (self.region, self.nbytes, self._next)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def array(self, shape, dtype):
        """A new C-contiguous numpy array of shape and dtype ("f32", "f64", "f16", "bf16") in the buffer.

        Each starts 256 bytes aligned past the previous one; ResourceExhausted when the
        buffer has no room left (reset() gives it all back). bf16 arrays are ml_dtypes
        bfloat16 where ml_dtypes is installed, else uint16 bits (pass dtype="bf16" to matmul).
        """
        method = "HostBuffer.array"
        np_dtype = _numpy_dtype(dtype, method)
        try:
            shape = tuple(operator.index(d) for d in (shape if isinstance(shape, tuple) else (shape,)))
        except TypeError:
            raise invalid_argument(method, "shape=%r: expected integers" % (shape,)) from None
        if any(d < 0 for d in shape):
            raise invalid_argument(method, "shape=%r: expected no negative dimension" % (shape,))
        size = math.prod(shape) * np_dtype.itemsize
        with self._lock:
            if self._closed:
                raise ValueError("%r is closed" % self)
            offset = align_up(self._next)
            if offset + size > self.nbytes:
                raise error_for(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                "%d bytes for %s %s at offset %d do not fit the buffer's %d bytes (reset() frees "
                                "what it handed out; a larger host_buffer holds more)"
                                % (size, shape, np_dtype, offset, self.nbytes), method)
            self._next = offset + size
        return np.ndarray(shape, dtype=np_dtype, buffer=self._map, offset=offset)

    def reset(self):
        """Hands the whole buffer out again: arrays made before now alias the next ones."""
        with self._lock:
            self._next = 0

    def offset_of(self, x):
        """x's byte offset in the buffer if x is a C-contiguous numpy array inside it, else None."""
        if self._closed or not self.holds(x):
            return None
        return x.__array_interface__["data"][0] - self.address

    def holds(self, x):
        """Whether x is a C-contiguous numpy array inside the buffer's memory (closed or not)."""
        if not isinstance(x, np.ndarray) or not x.flags.c_contiguous:
            return False
        begin = x.__array_interface__["data"][0]
        return self.address <= begin and begin + x.nbytes <= self.address + self.nbytes

    def abandon(self):
        """Forgets the region, which the daemon no longer has (its session ended): no call."""
        with self._lock:
            self._closed = True

    def close(self):
        """Unregisters the region (its arrays stay readable here, but no longer reach the daemon). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        client = self._client
        with client._session_lock:
            if self in client._host_buffers:
                client._host_buffers.remove(self)
        if not client._closed:
            client._call("UnregisterRegion", client._dispatch.UnregisterRegion,
                         pb.UnregisterRegionRequest(id=self.region))


def gone(client, x):
    """The region id of an abandoned host buffer of client's holding x (its session ended), else None."""
    for buffer in list(client._gone_buffers):
        if buffer.holds(x):
            return buffer.region
    return None


def locate(client, x):
    """(region, offset) of numpy array x in one of client's host buffers, or None."""
    for buffer in list(client._host_buffers):
        offset = buffer.offset_of(x)
        if offset is not None:
            return buffer.region, offset
    return None
