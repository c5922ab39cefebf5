"""`python-sriov`: SR-IOV virtual functions as DRA partitions, in Python.

Each advertised device is an SR-IOV physical function (PF). `dra-layout`
gives PF number n (its position) the counter set `pf-<n>` with `vfs` (the
PF's `sriov_totalvfs`, else guest-config `vfs`, else 8) and `queue-pairs`
(guest-config, default 64); the whole PF takes all of both, and each
partition `pf-<n>-vf-<i>` takes one VF and its share of the queue pairs.
`dra-prepare` creates a claimed VF through a granted attribute and reports
it Ready with its interface name; `dra-unprepare` removes it.

    writable-attributes = ["sriov_vf_enable", "sriov_vf_disable"]
    [guest-config]
    queue-pairs = "64"
    create-attribute = "sriov_vf_enable"
    remove-attribute = "sriov_vf_disable"

The same guest exists in JavaScript (`js/sriov.js`) and C (`c/sriov.c`).
Build: `componentize-py -d wit -w sriov-guest componentize app`, where
wit/ holds `guests/polyglot/wit/sriov.wit` and the policy package under
deps/ (see `guests/polyglot/build.sh`).
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.dra_layout import (
    Counter, CounterConsumption, CounterSet, DeviceLayout, Layout, Partition,
)
from wit_world.imports import hardware, host
from wit_world.imports.types import DeviceCondition, DeviceStatus, NetworkData


def setting(name, default):
    return dict(host.config()).get(name, default)


def whole_number(what, text):
    text = text.strip(" \t\r\n")
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise Err(f'{what}: expected a whole number, got "{text}"')
    return int(text)


def total_vfs(pf):
    """The PF's `sriov_totalvfs`, else guest-config `vfs`, else 8."""
    try:
        text = hardware.read_attribute(pf, "sriov_totalvfs")
    except Err:
        return whole_number("guest-config key `vfs`", setting("vfs", "8"))
    return whole_number(f"{pf}: sriov_totalvfs", text)


def amounts(vfs, queue_pairs):
    return [Counter("vfs", str(vfs)), Counter("queue-pairs", str(queue_pairs))]


def vf_index(device):
    """The VF number of a partition this guest made (`pf-<n>-vf-<i>`)."""
    _, sep, index = device.id.rpartition("-vf-")
    if not (device.partition and sep and index.isascii() and index.isdigit() and len(index) <= 9):
        return None
    return int(index)


def pf_present(pf):
    return any(c.id == pf and c.present for c in hardware.candidates())


def netdev(pf):
    """The PF's first network interface (`pci.net`), or ""."""
    for candidate in hardware.candidates():
        if candidate.id == pf:
            net = dict(candidate.attributes).get("pci.net", "")
            return net.split(",")[0]
    return ""


class DraLayout(exports.DraLayout):
    def describe(self, devices):
        queue_pairs = whole_number("guest-config key `queue-pairs`", setting("queue-pairs", "64"))
        layout = Layout([], [], [])
        for n, device in enumerate(devices):
            pf = device.candidates[0] if device.candidates else device.id
            vfs, counters = total_vfs(pf), f"pf-{n}"
            layout.counter_sets.append(CounterSet(counters, amounts(vfs, queue_pairs)))
            # The whole PF takes every VF and queue pair: it excludes its VFs.
            layout.devices.append(
                DeviceLayout(device.id, [CounterConsumption(counters, amounts(vfs, queue_pairs))], [], False))
            for i in range(vfs):
                layout.partitions.append(Partition(
                    id=f"pf-{n}-vf-{i}",
                    parent=device.id,
                    attributes=[("vf-index", str(i)), ("pf-address", pf)],
                    consumes_counters=[CounterConsumption(counters, amounts(1, queue_pairs // vfs))],
                    capacity=[],
                ))
        return layout


class DraPrepare(exports.DraPrepare):
    def prepare(self, devices):
        create = setting("create-attribute", "sriov_vf_enable")
        statuses = []
        for device in devices:
            i, pf = vf_index(device), device.device_id  # built-in discovery: the PF's address
            if i is None:
                continue  # the whole PF: nothing to create
            # A stand-in: on a real NIC a vendor tool (or `sriov_numvfs` and
            # the VF's own attributes) creates and configures the VF.
            try:
                hardware.write_attribute(pf, create, str(i))
            except Err as e:
                raise Err(f"{device.id}: cannot create VF {i} of {pf}: {e.value}")
            host.log(host.LogLevel.INFO, f"{device.id}: created VF {i} of {pf}")
            name = netdev(pf)
            statuses.append(DeviceStatus(
                id=device.id,
                conditions=[DeviceCondition("Ready", "True", "VfReady", f"VF {i} of {pf} is ready")],
                data=None,
                network=NetworkData(f"{name}v{i}" if name else "", [], ""),
            ))
        return statuses


class DraUnprepare(exports.DraUnprepare):
    def unprepare(self, devices):
        remove = setting("remove-attribute", "sriov_vf_disable")
        for device in devices:
            i, pf = vf_index(device), device.device_id
            # Remove only what exists: a PF that is gone took its VFs with it,
            # and the attribute ignores a VF that was never created.
            if i is None or not pf_present(pf):
                continue
            try:
                hardware.write_attribute(pf, remove, f"-{i}")
            except Err as e:
                raise Err(f"{device.id}: cannot remove VF {i} of {pf}: {e.value}")
            host.log(host.LogLevel.INFO, f"{device.id}: removed VF {i} of {pf}")
