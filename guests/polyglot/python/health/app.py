"""`python-health`: the `presence-health` health guest, in Python.

Same behaviour as the Rust guest (`guests/presence-health`): a device is
unhealthy while any of its candidates is not present, and (for PCI
candidates) while no driver is bound or the bound driver is not in the
config list `drivers` (when given). Every verdict carries a reason.

    [guest-config]
    drivers = "nvidia,vfio-pci"

Build: `componentize-py -d wit -w health-guest componentize app`
(see `guests/polyglot/build.sh`).
"""

from wit_world import exports
from wit_world.exports import health
from wit_world.imports import host, types

# Unicode White_Space, what Rust's `str::trim` removes (Python's own
# `str.strip()` removes a few more characters).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def lookup(pairs, name):
    """The first value of `name` in a list of (name, value) pairs."""
    for key, value in pairs:
        if key == name:
            return value
    return None


def config_list(key):
    """A config value as a comma-separated list, as the Rust SDK reads it:
    blanks trimmed, empty items dropped, `["a", "b"]` accepted too."""
    value = lookup(host.config(), key)
    if value is None:
        return []
    value = value.strip(WHITE_SPACE)
    if len(value) >= 2 and value[0] == "[" and value[-1] == "]":
        value = value[1:-1]
    items = (item.strip(WHITE_SPACE) for item in value.split(","))
    items = (item.strip("\"'") for item in items if item)
    return [item for item in items if item]


def problem(candidate, drivers):
    """Why `candidate` makes its device unhealthy, if it does."""
    if not candidate.present:
        return f"candidate {candidate.id} is not present"
    if candidate.kind != types.CandidateKind.PCI:
        return None
    driver = lookup(candidate.attributes, "pci.driver")
    if not driver:
        return f"candidate {candidate.id} has no driver bound"
    if drivers and driver not in drivers:
        return (
            f"candidate {candidate.id} is bound to driver {driver}, "
            f"expected one of {', '.join(drivers)}"
        )
    return None


def verdict(facts, drivers):
    device = facts.device
    problems = []
    for id in device.candidates:
        candidate = next((c for c in facts.candidates if c.id == id), None)
        if candidate is None:
            problems.append(f"candidate {id} is gone")
        else:
            found = problem(candidate, drivers)
            if found is not None:
                problems.append(found)
    if problems:
        return health.Verdict(id=device.id, healthy=False, reason="; ".join(problems))
    return health.Verdict(
        id=device.id,
        healthy=True,
        reason=f"all {len(device.candidates)} candidates present",
    )


class Health(exports.Health):
    def check(self, devices: list[health.DeviceFacts]) -> list[health.Verdict]:
        drivers = config_list("drivers")
        return [verdict(facts, drivers) for facts in devices]
