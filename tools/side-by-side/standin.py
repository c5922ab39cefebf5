"""The kubelet's side of the device-plugin API, as much of it as compare.py needs.

Built with grpcio on the repository's own copy of the upstream proto
(proto/deviceplugin/v1beta1/api.proto), so nothing of the project's Rust gRPC
stack is on the measuring side. One `Kubelet` serves `Registration` on
`<folder>/kubelet.sock`; each accepted `Register` is answered, then the plugin's
endpoint is dialled, `GetDevicePluginOptions` is asked and a `ListAndWatch`
stream is held open on a thread of its own, which timestamps every update.

The stubs are generated on first use into a folder the caller names (a cache
outside the clone), keyed by the proto's digest.
"""
import hashlib
import importlib
import os
import sys
import threading
import time
from concurrent import futures

import grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO = os.path.join(REPO, "proto", "deviceplugin", "v1beta1", "api.proto")


def load_stubs(cache_dir):
    """Generates (once) and imports the Python modules of the v1beta1 proto."""
    with open(PROTO, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(cache_dir, "stubs", digest)
    if not os.path.exists(os.path.join(out, "deviceplugin_v1beta1_pb2_grpc.py")):
        from grpc_tools import protoc
        tmp = out + ".tmp"
        os.makedirs(tmp, exist_ok=True)
        # A module name of our own: protoc names the modules after the file.
        src = os.path.join(tmp, "deviceplugin_v1beta1.proto")
        with open(PROTO, "rb") as f, open(src, "wb") as g:
            g.write(f.read())
        argv = ["grpc_tools.protoc", f"-I{tmp}", f"--python_out={tmp}",
                f"--grpc_python_out={tmp}", src]
        if protoc.main(argv) != 0:
            raise RuntimeError(f"protoc failed on {PROTO}")
        os.replace(tmp, out)
    if out not in sys.path:
        sys.path.insert(0, out)
    pb2 = importlib.import_module("deviceplugin_v1beta1_pb2")
    pb2_grpc = importlib.import_module("deviceplugin_v1beta1_pb2_grpc")
    return pb2, pb2_grpc


class Plugin:
    """One registered resource: its options, its stream's updates, a stub to call it."""

    def __init__(self, request, registered_at):
        self.resource = request.resource_name
        self.endpoint = request.endpoint
        self.version = request.version
        self.registered_at = registered_at
        self.updates = []      # (monotonic time, number healthy, number listed)
        self.healthy_ids = []  # of the latest update
        self.stub = None
        self.channel = None
        self.error = None
        self.cond = threading.Condition()

    def wait_for(self, predicate, timeout, after=0.0):
        """The time of the first update at or after `after` whose (healthy, listed)
        satisfies predicate."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for when, healthy, listed in self.updates:
                    if when >= after and predicate(healthy, listed):
                        return when
                left = deadline - time.monotonic()
                if left <= 0 or self.error is not None:
                    return None
                self.cond.wait(left)


class Kubelet:
    def __init__(self, folder, stubs):
        self.folder = folder
        self.pb2, self.pb2_grpc = stubs
        self.plugins = []
        self.problems = []
        self.cond = threading.Condition()
        self.server = None

    # Registration service -------------------------------------------------
    def _register(self, request, context):
        now = time.monotonic()
        endpoint = os.path.join(self.folder, request.endpoint)
        if request.version != "v1beta1" or "/" in request.endpoint \
                or not os.path.exists(endpoint):
            self.problems.append(f"refused Register {request}")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad registration")
        plugin = Plugin(request, now)
        with self.cond:
            self.plugins.append(plugin)
            self.cond.notify_all()
        threading.Thread(target=self._watch, args=(plugin, endpoint), daemon=True).start()
        return self.pb2.Empty()

    def _watch(self, plugin, endpoint):
        try:
            # The kubelet dials with authority "localhost"; grpcio's default
            # authority for a unix target is the path, which strict HTTP/2
            # servers refuse.
            plugin.channel = grpc.insecure_channel(
                "unix://" + endpoint, options=[("grpc.default_authority", "localhost")])
            plugin.stub = self.pb2_grpc.DevicePluginStub(plugin.channel)
            plugin.stub.GetDevicePluginOptions(self.pb2.Empty(), timeout=10)
            for response in plugin.stub.ListAndWatch(self.pb2.Empty()):
                now = time.monotonic()
                ids = [d.ID for d in response.devices if d.health == "Healthy"]
                healthy = len(ids)
                with plugin.cond:
                    plugin.healthy_ids = ids
                    plugin.updates.append((now, healthy, len(response.devices)))
                    plugin.cond.notify_all()
        except grpc.RpcError as e:
            with plugin.cond:
                plugin.error = e
                plugin.cond.notify_all()

    def start(self):
        handler = grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self._register,
                request_deserializer=self.pb2.RegisterRequest.FromString,
                response_serializer=self.pb2.Empty.SerializeToString),
        })
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port("unix://" + os.path.join(self.folder, "kubelet.sock"))
        self.server.start()

    def stop(self):
        for plugin in self.plugins:
            if plugin.channel is not None:
                plugin.channel.close()
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None

    def restart(self):
        """As a restarting kubelet: stops serving, empties the folder of its
        sockets (the device manager does so when it starts), serves again.
        The time kubelet.sock is served again."""
        self.stop()
        for name in os.listdir(self.folder):
            path = os.path.join(self.folder, name)
            if not os.path.isdir(path):
                os.unlink(path)
        self.start()
        return time.monotonic()

    def wait_registered(self, timeout, after=0.0):
        """The first plugin registered at or after `after`."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for plugin in self.plugins:
                    if plugin.registered_at >= after:
                        return plugin
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def allocate(self, plugin, device_ids):
        """One Allocate for one container; the client's round trip in seconds."""
        request = self.pb2.AllocateRequest(container_requests=[
            self.pb2.ContainerAllocateRequest(devices_ids=list(device_ids))])
        t0 = time.perf_counter()
        response = plugin.stub.Allocate(request, timeout=10)
        elapsed = time.perf_counter() - t0
        if len(response.container_responses) != 1:
            raise RuntimeError(f"Allocate answered {len(response.container_responses)} containers")
        return elapsed
