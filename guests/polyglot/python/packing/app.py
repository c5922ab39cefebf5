"""`python-packing`: the `numa-packing` preferred-allocation guest, in Python.

Same behaviour as the Rust guest (`guests/numa-packing`, logic in
`guests/packing-core`): keep the must-include IDs, then pack by NUMA node
and link locality (`link.group` attribute, else the PCIe switch from
`pci.path`), best fit, ties broken by ID.

It also exports the by-index form (`preferred-allocation-indexed`): the
host sends the device table once per device-set generation
(`set_devices`) and then, per call, only positions in it. Turning the
request into Python objects is most of a plain call's cost (every
device's strings, copied and decoded on every call); by index a call
lifts a few integers and reuses the devices lifted once.

Build: `componentize-py -d wit -w preferred-allocation-indexed-guest
componentize app` (see `guests/polyglot/build.sh`).
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import preferred_allocation, preferred_allocation_indexed

# Devices without NUMA information form the last tier.
NO_NUMA = 1 << 62


def lookup(attributes, name):
    """The first value of attribute `name`, or None (also when empty)."""
    for key, value in attributes:
        if key == name:
            return value or None
    return None


def locality_key(attributes):
    """`link.group`, else the grandparent directory of `pci.path`, else None."""
    group = lookup(attributes, "link.group")
    if group is not None:
        return group
    path = lookup(attributes, "pci.path")
    # Devices behind one PCIe switch share their grandparent.
    return parent(parent(path))


def parent(path):
    """The parent directory, or None (no slash, or an empty parent)."""
    if path is None:
        return None
    path = path.rstrip("/")
    slash = path.rfind("/")
    return path[:slash] if slash > 0 else None


def debug_str(text):
    """Rust's `{:?}` of a string (quotes and the usual escapes)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append("\\u{%x}" % code)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def take(members, remaining, chosen):
    count = min(len(members), remaining)
    chosen.extend(members[:count])
    return remaining - count


def choose(available, must_include, size):
    """Exactly `size` distinct IDs from `available`, must-include first."""
    # Distinct available devices, first occurrence wins.
    by_id = {}
    for device in available:
        by_id.setdefault(device.id, device)
    if len(by_id) < size:
        raise Err(f"only {len(by_id)} devices available for an allocation of {size}")

    chosen = []
    chosen_set = set()
    for id in must_include:
        if id not in by_id:
            raise Err(f"must-include device {debug_str(id)} is not available")
        if id not in chosen_set:
            chosen_set.add(id)
            chosen.append(id)
    if len(chosen) > size:
        raise Err(f"{len(chosen)} must-include devices do not fit an allocation of {size}")
    remaining = size - len(chosen)
    if remaining == 0:
        return chosen

    # Python compares strings by code point: the same order as Rust's bytes.
    ids = sorted(by_id)
    localities = {id: locality_key(by_id[id].attributes) for id in ids}

    # Rank NUMA nodes: nodes of must-include devices first (most such
    # devices first), then by the number of other available devices.
    per_node = {}
    affinity = set()
    for id in ids:
        must = id in chosen_set
        for node in by_id[id].numa_nodes:
            counts = per_node.setdefault(node, [0, 0])
            counts[0 if must else 1] += 1
        if must and localities[id] is not None:
            affinity.add(localities[id])
    nodes = sorted(per_node.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    rank = {node: index for index, (node, _) in enumerate(nodes)}

    # Tier -> (locality key -> members, lone devices).
    tiers = {}
    for id in ids:
        if id in chosen_set:
            continue
        numa = by_id[id].numa_nodes
        tier = min(rank[node] for node in numa) if numa else NO_NUMA
        grouped, lone = tiers.setdefault(tier, ({}, []))
        key = localities[id]
        if key is None:
            lone.append(id)
        else:
            grouped.setdefault(key, []).append(id)

    for tier in sorted(tiers):
        if remaining == 0:
            break
        grouped, lone = tiers[tier]
        groups = [(key, grouped[key]) for key in sorted(grouped)]
        groups += [(None, [id]) for id in lone]

        # Groups linked to what is already chosen come first, by key.
        rest = []
        for key, members in groups:
            if remaining > 0 and key is not None and key in affinity:
                remaining = take(members, remaining, chosen)
            else:
                rest.append((key, members))

        # Then best fit: sorted by (size, key, first ID).
        rest.sort(key=lambda g: (len(g[1]), g[0] is not None, g[0] or "", g[1][0]))
        while remaining > 0 and rest:
            pick = next((i for i, g in enumerate(rest) if len(g[1]) >= remaining), None)
            if pick is None:
                # None covers the rest: the first of the biggest groups.
                biggest = len(rest[-1][1])
                pick = next(i for i, g in enumerate(rest) if len(g[1]) >= biggest)
            _, members = rest.pop(pick)
            remaining = take(members, remaining, chosen)
    return chosen


class PreferredAllocation(exports.PreferredAllocation):
    def choose(self, request: preferred_allocation.Request) -> list[str]:
        return choose(request.available, request.must_include, request.size)


# The device table of the latest `set_devices`, and each ID's position.
TABLE = None
POSITIONS = {}


def device_at(position):
    if position >= len(TABLE):
        raise Err(f"position {position} is outside the device table of {len(TABLE)}")
    return TABLE[position]


class PreferredAllocationIndexed(exports.PreferredAllocationIndexed):
    def set_devices(self, generation: int, devices: list) -> None:
        global TABLE, POSITIONS
        TABLE = devices
        POSITIONS = {device.id: index for index, device in enumerate(devices)}

    def choose(self, request: preferred_allocation_indexed.Request) -> list[int]:
        if TABLE is None:
            raise Err("no device table: the host called choose before set-devices")
        available = [device_at(p) for p in request.available]
        must_include = [device_at(p).id for p in request.must_include]
        chosen = choose(available, must_include, request.size)
        return [POSITIONS[id] for id in chosen]
