

class PreStart(exports.PreStart):
    """`pre-start`: refuses to start a container with a device that has no
    device node; `raise Err(...)` fails the start with its message."""

    def pre_start(self, devices: list[types.DeviceRef]) -> None:
        for device in devices:
            if not device.nodes:
                raise Err(f"device {device.id} has no device node")
        host.log(host.LogLevel.INFO, f"pre-start: {len(devices)} device(s) ready")
