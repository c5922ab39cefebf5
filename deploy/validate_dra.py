"""The DRA checks of deploy/validate.py: what a rendered set needs when its
config serves a resource through Dynamic Resource Allocation (`api = "dra"`),
and what it must not carry when it does not.

A DRA set must give the host the kubelet's plugin folders and a state
folder on the node (at the paths its flags name), the node's name, a
service-account token, RBAC for exactly what the DRA mode calls, and a
DeviceClass per driver (plus one with extendedResourceName so extended
resource pod specs keep working). A set without DRA resources keeps the
base's least privilege: no token, no ClusterRole.
"""

from __future__ import annotations

import tomllib
from typing import Any, Callable

DRA_GROUP = "resource.k8s.io/"

# resource -> verbs the DRA mode needs (api group, resource).
DRA_RULES = {
    ("resource.k8s.io", "resourceclaims"): {"get"},
    ("resource.k8s.io", "resourceclaims/status"): {"update"},
    # 1.36+: the per-driver permission the status.devices write also takes,
    # for claims on the pod's own node (the pod-bound token's node).
    ("resource.k8s.io", "resourceclaims/driver"): {"associated-node:update"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch", "create", "update", "delete"},
    ("", "nodes"): {"get"},
    # The Warning Event on the node when a start serves the last good
    # configuration.
    ("", "events"): {"create"},
}

# flag -> the hostPath it must be mounted from (same path inside).
DRA_FOLDERS = ("--plugins-dir", "--plugins-registry-dir", "--state-dir")


def dra_drivers(configmaps: dict[str, dict[str, Any]]) -> dict[str, str]:
    """driver -> config file, for every resource file with api = "dra"."""
    drivers = {}
    for cm in configmaps.values():
        for name, text in (cm.get("data") or {}).items():
            if not name.endswith(".toml"):
                continue
            doc = tomllib.loads(text)
            if doc.get("api") == "dra":
                drivers[str(doc.get("driver"))] = name
    return drivers


def uses_config_sets(pod: dict[str, Any]) -> bool:
    """Whether the config volume places files under sets/ (named
    configuration sets, picked by the node's label)."""
    for volume in pod.get("volumes", []):
        for source in (volume.get("projected") or {}).get("sources", []):
            for item in (source.get("configMap") or {}).get("items", []):
                if item.get("path", "").startswith("sets/"):
                    return True
    return False


def check_config_sets(
    label: str,
    where: str,
    pod: dict[str, Any],
    c: dict[str, Any],
    configmaps: dict[str, Any],
    roles: list[dict[str, Any]],
    failure: Callable[[str], Exception],
) -> str:
    """Configuration sets without DRA: the host reads its own Node's label,
    so it needs a token, NODE_NAME and read access to nodes, create on
    events (the Warning Event when a start serves the last good
    configuration), and nothing more (patch only when a host.toml asks to
    report the state)."""
    if pod.get("automountServiceAccountToken") is not True:
        raise failure(f"{where}: configuration sets need the service-account token mounted (the host reads its Node's label)")
    env = {e.get("name"): e for e in c.get("env", [])}
    field = env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if field != "spec.nodeName":
        raise failure(f"{where}: configuration sets need NODE_NAME from spec.nodeName")
    report_state = any(
        (tomllib.loads(text).get("config-sets") or {}).get("report-state") is True
        for cm in configmaps.values()
        for name, text in (cm.get("data") or {}).items()
        if name == "host.toml"
    )
    wanted = {"get", "list", "watch"} | ({"patch"} if report_state else set())
    granted: set[str] = set()
    events = False
    for role in roles:
        for rule in role.get("rules", []):
            if rule.get("apiGroups") == [""] and rule.get("resources") == ["events"] and rule.get("verbs") == ["create"]:
                events = True
                continue
            if rule.get("apiGroups") != [""] or rule.get("resources") != ["nodes"]:
                raise failure(f"{label}: ClusterRole {role['metadata']['name']} grants {rule}: configuration sets need nodes and create on events only")
            granted |= set(rule.get("verbs", []))
    if granted != wanted:
        raise failure(f"{label}: configuration sets need {sorted(wanted)} on nodes, the ClusterRoles grant {sorted(granted)}")
    if not events:
        raise failure(f"{label}: configuration sets need create on events (the Warning Event of a start on the last good configuration)")
    return f"{label}: configuration sets: token, NODE_NAME, {sorted(wanted)} on nodes and create on events only"


def is_dra_object(doc: dict[str, Any]) -> bool:
    return doc.get("apiVersion", "").startswith(DRA_GROUP)


def check_dra(label: str, docs: list[dict[str, Any]], failure: Callable[[str], Exception]) -> str | None:
    """Raises `failure(msg)` on a problem; returns a line saying what was checked."""
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    (ds,) = [d for d in docs if d.get("kind") == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    where = f"{label}: DaemonSet {ds['metadata']['name']}"
    drivers = dra_drivers(configmaps)
    roles = [d for d in docs if d.get("kind") == "ClusterRole"]
    classes = [d for d in docs if d.get("kind") == "DeviceClass"]

    if not drivers and uses_config_sets(pod):
        return check_config_sets(label, where, pod, c, configmaps, roles, failure)
    if not drivers:
        if pod.get("automountServiceAccountToken") is not False:
            raise failure(f"{where}: no DRA resource, so no service-account token may be mounted")
        if roles:
            raise failure(f"{label}: no DRA resource, yet a ClusterRole is rendered")
        return None

    if pod.get("automountServiceAccountToken") is not True:
        raise failure(f"{where}: DRA resources ({', '.join(sorted(drivers))}) need the service-account token mounted")
    args = c.get("args", [])
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for flag in DRA_FOLDERS:
        if flag not in args:
            raise failure(f"{where}: DRA needs {flag}")
        path = args[args.index(flag) + 1]
        m = mounts.get(path)
        vol = volumes.get(m["name"]) if m else None
        if not vol or vol.get("hostPath", {}).get("path") != path:
            raise failure(f"{where}: {flag} {path} must be the node's {path} (hostPath, same path)")
    # The PodResources socket: mounted from the node's folder, read only.
    if "--pod-resources-socket" not in args:
        raise failure(f"{where}: DRA needs --pod-resources-socket (devices held through the device plugin during a switch)")
    socket = args[args.index("--pod-resources-socket") + 1]
    folder = socket.rsplit("/", 1)[0]
    m = mounts.get(folder)
    vol = volumes.get(m["name"]) if m else None
    if not vol or vol.get("hostPath", {}).get("path") != folder:
        raise failure(f"{where}: --pod-resources-socket {socket} must be in the node's {folder} (hostPath, same path)")
    if m.get("readOnly") is not True:
        raise failure(f"{where}: the PodResources folder {folder} must be mounted read-only")
    node_env = [e for e in c.get("env", []) if e.get("name") == "NODE_NAME"]
    if not node_env or node_env[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        raise failure(f"{where}: NODE_NAME must come from fieldRef spec.nodeName (slices are published per node)")

    sa = pod.get("serviceAccountName")
    bound = {
        b["roleRef"]["name"]
        for b in docs
        if b.get("kind") == "ClusterRoleBinding"
        and any(s.get("kind") == "ServiceAccount" and s.get("name") == sa for s in b.get("subjects", []))
    }
    granted: dict[tuple[str, str], set[str]] = {}
    for role in roles:
        if role["metadata"]["name"] not in bound:
            continue
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for res in rule.get("resources", []):
                    granted.setdefault((group, res), set()).update(rule.get("verbs", []))
    for (group, res), verbs in DRA_RULES.items():
        missing = verbs - granted.get((group, res), set())
        if missing:
            raise failure(f"{label}: service account {sa} lacks {sorted(missing)} on {group or 'core'}/{res}")
    extra = {k for k in granted if k not in DRA_RULES}
    if extra:
        raise failure(f"{label}: service account {sa} is granted more than the DRA mode needs: {sorted(extra)}")

    for driver, fname in drivers.items():
        selecting = [
            d for d in classes
            if any(f'device.driver == "{driver}"' in (s.get("cel") or {}).get("expression", "")
                   for s in d["spec"].get("selectors", []))
        ]
        if not selecting:
            raise failure(f"{label}: no DeviceClass selects driver {driver} ({fname})")
        if not any(d["spec"].get("extendedResourceName") for d in selecting):
            raise failure(f"{label}: no DeviceClass with extendedResourceName for driver {driver}")
    return f"{label}: DRA drivers {', '.join(sorted(drivers))}: folders, NODE_NAME, token, RBAC and DeviceClasses consistent"
