"""The guest-image checks of deploy/validate.py: what a rendered set needs
when its config names guests by absolute path, from a guest image
(`wasm-device-plugin package`) mounted as an image volume or copied into an
emptyDir by an init container.

Every absolute guest path must lie under a mount of the plugin container
(read-only, and not nested in another read-only mount) that provides it: an image volume (the image's root, so its guests sit
under `guests/`) or an emptyDir that an init container fills with
`install-guests --from /guests --to <folder>` (the guest must then be in
the folder the init container writes, as the plugin sees it). Image
references are pinned by digest; init containers run with least privilege
and bounded resources; `sha256` pins are well-formed.
"""

from __future__ import annotations

import re
from typing import Any, Callable

# volumes[].image (KEP-4639) is in the Kubernetes schemas from 1.31 on.
IMAGE_VOLUME_SINCE = (1, 31)
# What `package` lays out in the image, and where install-guests reads it.
IMAGE_GUESTS_DIR = "guests"
DIGEST_PINNED = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
SHA256_PIN = re.compile(r"^(sha256:)?[0-9a-fA-F]{64}$")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:2])


def has_image_volume(doc: dict[str, Any]) -> bool:
    """Whether a workload's pod template has a volume of type `image`."""
    pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return any("image" in v for v in pod.get("volumes") or [])


def under(path: str, folder: str) -> str | None:
    """`path` relative to `folder`, or None when it is not inside it."""
    folder = folder.rstrip("/")
    if path.startswith(folder + "/"):
        return path[len(folder) + 1:]
    return None


def arg_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def check_init_containers(where: str, pod: dict[str, Any], failure: Callable[[str], Exception]) -> None:
    """Every init container: least privilege, bounded resources, a pinned image."""
    for ic in pod.get("initContainers") or []:
        name = f"{where}: init container {ic.get('name')}"
        sc = ic.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        if sc.get("privileged") or caps.get("add") or "ALL" not in (caps.get("drop") or []):
            raise failure(f"{name}: must be unprivileged, drop ALL capabilities and add none")
        if sc.get("allowPrivilegeEscalation") is not False:
            raise failure(f"{name}: allowPrivilegeEscalation must be false")
        if not sc.get("readOnlyRootFilesystem"):
            raise failure(f"{name}: readOnlyRootFilesystem must be true")
        if sc.get("runAsNonRoot") is not True or sc.get("runAsUser") in (None, 0):
            raise failure(f"{name}: must run as a non-root user (runAsNonRoot, runAsUser)")
        if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            raise failure(f"{name}: seccompProfile must be RuntimeDefault")
        limits = (ic.get("resources") or {}).get("limits") or {}
        if "cpu" not in limits or "memory" not in limits:
            raise failure(f"{name}: needs cpu and memory limits")
        if not DIGEST_PINNED.match(ic.get("image", "")):
            raise failure(f"{name}: image {ic.get('image')!r} is not pinned by digest (name@sha256:<64 hex>)")


def check_image_volumes(where: str, pod: dict[str, Any], failure: Callable[[str], Exception]) -> None:
    """Every image volume: pinned by digest, a pull policy, mounted read-only."""
    mounts = [m for c in pod.get("containers", []) for m in c.get("volumeMounts") or []]
    for vol in pod.get("volumes") or []:
        if "image" not in vol:
            continue
        ref = vol["image"].get("reference", "")
        if not DIGEST_PINNED.match(ref):
            raise failure(
                f"{where}: image volume {vol['name']}: {ref!r} is not pinned by digest "
                f"(name@sha256:<64 hex>, as `wasm-device-plugin package` prints)"
            )
        if vol["image"].get("pullPolicy") not in ("IfNotPresent", "Always", "Never"):
            raise failure(f"{where}: image volume {vol['name']}: set pullPolicy (IfNotPresent for a digest)")
        for m in mounts:
            if m["name"] == vol["name"] and m.get("readOnly") is not True:
                raise failure(f"{where}: image volume {vol['name']} at {m['mountPath']} must be mounted readOnly")


def check_guest_sources(
    where: str,
    pod: dict[str, Any],
    container: dict[str, Any],
    tomls: dict[str, dict[str, Any]],
    failure: Callable[[str], Exception],
) -> str | None:
    """Raises `failure(msg)` when an absolute guest path is not provided by
    a guest image; returns a line saying what was checked, or None when
    no guest is named by absolute path."""
    check_init_containers(where, pod, failure)
    check_image_volumes(where, pod, failure)
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    mounts = container.get("volumeMounts") or []
    served: dict[str, list[str]] = {}
    for fname, doc in sorted(tomls.items()):
        for hook, hcfg in (doc.get("hooks") or {}).items():
            if not isinstance(hcfg, dict):
                continue
            pin = hcfg.get("sha256")
            if pin is not None and not SHA256_PIN.match(str(pin)):
                raise failure(f"{where}: {fname} [hooks.{hook}] sha256 = {pin!r} is not 64 hex digits")
            guest = hcfg.get("guest")
            if not isinstance(guest, str) or not guest.startswith("/"):
                continue
            what = f"{fname} [hooks.{hook}] names guest {guest!r}"
            inside = [(m, under(guest, m["mountPath"])) for m in mounts]
            inside = [(m, rel) for m, rel in inside if rel is not None]
            if not inside:
                raise failure(
                    f"{where}: {what}, which no volume of the plugin container mounts "
                    f"(mount the guest image there, or name the guest relative to the config)"
                )
            m, rel = max(inside, key=lambda mr: len(mr[0]["mountPath"]))
            vol = volumes.get(m["name"], {})
            if "projected" in vol or "configMap" in vol:
                continue  # the config volume: validate.py checks its layout
            if m.get("readOnly") is not True:
                raise failure(f"{where}: {what}: mount {m['mountPath']} must be readOnly (the plugin only reads guests)")
            for outer in mounts:
                if outer.get("readOnly") and under(m["mountPath"], outer["mountPath"]) is not None:
                    raise failure(
                        f"{where}: {what}: mount {m['mountPath']} lies inside the read-only mount "
                        f"{outer['mountPath']}, where the runtime cannot create its mount point"
                    )
            if "image" in vol:
                if under("/" + rel, "/" + IMAGE_GUESTS_DIR) is None:
                    raise failure(
                        f"{where}: {what}: the image volume at {m['mountPath']} shows the image's root, "
                        f"where `package` puts guests under {IMAGE_GUESTS_DIR}/ (expected "
                        f"{m['mountPath'].rstrip('/')}/{IMAGE_GUESTS_DIR}/…)"
                    )
                served.setdefault(f"image volume at {m['mountPath']}", []).append(guest)
            elif "emptyDir" in vol:
                fillers = []
                for ic in pod.get("initContainers") or []:
                    for im in ic.get("volumeMounts") or []:
                        if im["name"] != m["name"]:
                            continue
                        args = ic.get("args") or []
                        to, src = arg_value(args, "--to"), arg_value(args, "--from")
                        sub = under(to, im["mountPath"]) if to else None
                        if sub is None or src != "/" + IMAGE_GUESTS_DIR:
                            continue
                        # The folder the init container writes, as the plugin sees it.
                        seen = f"{m['mountPath'].rstrip('/')}/{sub}"
                        if under(guest, seen) is not None:
                            fillers.append(ic["name"])
                if not fillers:
                    raise failure(
                        f"{where}: {what}: emptyDir {m['name']} at {m['mountPath']} is not filled there by any "
                        f"init container running `install-guests --from /{IMAGE_GUESTS_DIR} --to <folder in the volume>`"
                    )
                served.setdefault(
                    f"emptyDir at {m['mountPath']} filled by {', '.join(sorted(set(fillers)))}", []
                ).append(guest)
            else:
                raise failure(
                    f"{where}: {what}: volume {m['name']} at {m['mountPath']} is neither an image volume "
                    f"nor an emptyDir an init container fills"
                )
    if not served:
        return None
    return "; ".join(f"{len(g)} guest(s) from the {src}" for src, g in sorted(served.items()))
