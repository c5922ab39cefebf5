

class Allocate(exports.Allocate):
    """`allocate`: the built-in answer (one device spec per device node),
    plus `EXAMPLE_VISIBLE_DEVICES` listing the container's device IDs."""

    def allocate(
        self, devices: list[types.DeviceRef], default: allocate.ContainerResponse
    ) -> allocate.ContainerResponse:
        default.envs.append(("EXAMPLE_VISIBLE_DEVICES", ",".join(d.id for d in devices)))
        return default
