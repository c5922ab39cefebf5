#!/usr/bin/env python3
"""Render and check the deploy/ manifests without a cluster.

Called by deploy/validate.sh, which provides the tools: one or more kubectl
binaries (for `kubectl kustomize`), and a virtualenv with kubernetes-validate,
helm-python-sdk (Helm's Go SDK through a C ABI, used to lint and render the
chart) and PyYAML.

Steps, each failing with a message that names the file and the object:
  1. render every kustomization under deploy/kustomize with every kubectl
     given, and require that they produce the same objects;
  2. lint the Helm chart (strict) and render it with its default values and
     with every ci/*-values.yaml;
  3. check what the schemas cannot: selectors, probe ports, volumes and
     ConfigMap keys behind them, no subPath on the config volume, the host
     mounts the plugin needs, TOML that parses, guests the TOML names present
     in the mounted layout, ConfigMap sizes; guests named by absolute path
     mounted there from a guest image (image volume, or an emptyDir an init
     container fills), images pinned by digest, init containers least
     privileged (validate_guest_image.py);
  4. require that the chart's default DaemonSet agrees with the kustomize
     base's on everything but names and labels, and that the chart's
     monitoring files (rules, dashboard) agree with deploy/kustomize/monitoring;
  5. check the monitoring objects (PodMonitor, PrometheusRule; Prometheus
     Operator CRDs, which the Kubernetes schemas do not know): the PodMonitor
     selects the plugin's pods on a port they name;
  6. validate every other rendered object against the Kubernetes OpenAPI
     schemas with kubernetes-validate --strict, for each requested version;
     unknown kinds fail too. Renders with an image volume (volumes[].image,
     in the schemas from 1.31 on) only against the versions from 1.31 on,
     plus --image-volume-versions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

from validate_dra import check_dra, is_dra_object
from validate_guest_image import IMAGE_VOLUME_SINCE, check_guest_sources, has_image_volume, version_tuple

CONFIG_MOUNT = "/etc/wasm-device-plugin/config"
HOST_MOUNTS = {  # host path -> container path the plugin expects
    "/var/lib/kubelet/device-plugins": "/var/lib/kubelet/device-plugins",
    "/sys": "/host/sys",
    "/dev": "/host/dev",
}
CONFIGMAP_LIMIT = 1024 * 1024  # the API server's limit for one object
MONITORING_GROUP = "monitoring.coreos.com/"
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass")
STARTUP_TOLERANCE_S = 60  # guest compilation the startup probe must allow


class Failure(Exception):
    pass


failures: list[str] = []
passed = 0


# What the passthrough overlay adds, and nothing else may.
PASSTHROUGH_CAPABILITIES = ["SYS_PTRACE"]


def ok(msg: str) -> None:
    global passed
    passed += 1
    print(f"ok    {msg}")


def fail(msg: str) -> None:
    failures.append(msg)
    print(f"FAIL  {msg}", file=sys.stderr)


def load_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def key(obj: dict[str, Any]) -> str:
    md = obj.get("metadata", {})
    ns = md.get("namespace")
    return f"{obj.get('kind')}/{(ns + '/') if ns else ''}{md.get('name')}"


def normalize(obj: Any) -> Any:
    """Drop empty maps that one kustomize version emits and another omits."""
    if isinstance(obj, dict):
        return {k: normalize(v) for k, v in obj.items() if v != {}}
    if isinstance(obj, list):
        return [normalize(v) for v in obj]
    return obj


# ---------------------------------------------------------------- rendering


def render_kustomize(kubectl: str, kdir: Path) -> tuple[str, str]:
    proc = subprocess.run(
        [kubectl, "kustomize", str(kdir)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise Failure(
            f"{kdir}: `{kubectl} kustomize` failed:\n{proc.stderr.strip()}"
        )
    return proc.stdout, proc.stderr


def check_surge_refused(chart: Path, dra_values: Path) -> None:
    """The DRA values with the default device-plugin file kept must not render."""
    import helm_python as helm  # from the validate.sh virtualenv

    values = yaml.safe_load(dra_values.read_text())
    values["config"]["files"].pop("fuse.toml", None)
    with helm.Chart.load(str(chart)) as ch:
        try:
            ch.render(values, name="wdp", namespace="wasm-device-plugin", is_install=True)
        except helm.HelmError as exc:
            if "fuse.toml is not a DRA resource" not in str(exc):
                raise Failure(f"helm/{chart.name}: a surge upgrade with fuse.toml failed without naming it: {exc}") from None
            return
    raise Failure(f"helm/{chart.name}: dra.surgeUpgrade with a device-plugin resource (fuse.toml) rendered; two pods would fight over its socket")


def render_helm(chart: Path, values_file: Path | None, namespace: str) -> str:
    import helm_python as helm  # from the validate.sh virtualenv

    values = yaml.safe_load(values_file.read_text()) if values_file else {}
    values = values or {}
    label = f"{chart}" + (f" with {values_file.name}" if values_file else "")
    report = helm.lint(
        str(chart), values, strict=True, namespace=namespace, quiet=False
    )
    problems = [
        f"{m['path']}: {m['error'].strip()}"
        for m in report.get("messages", [])
        if m.get("severity", 0) >= 2
    ] + [e.strip() for e in report.get("errors", [])]
    if problems:
        raise Failure(f"helm lint --strict {label}:\n  " + "\n  ".join(problems))
    with helm.Chart.load(str(chart)) as ch:
        try:
            out = ch.render(
                values, name="wdp", namespace=namespace, is_install=True
            )
        except helm.HelmError as exc:
            raise Failure(f"helm template {label}: {exc}") from None
    parts = []
    for path in sorted(out):
        if not path.endswith((".yaml", ".yml")) or not out[path].strip():
            continue
        parts.append(f"# Source: {path}\n{out[path].strip()}\n")
    return "---\n".join(parts)


# ------------------------------------------------------------ semantic checks


def config_layout(
    volume: dict[str, Any], configmaps: dict[str, dict[str, Any]], where: str
) -> set[str] | None:
    """Files the config volume shows, or None if a ConfigMap is external."""
    sources = []
    if "projected" in volume:
        sources = [s["configMap"] for s in volume["projected"].get("sources", []) if "configMap" in s]
    elif "configMap" in volume:
        sources = [volume["configMap"]]
    else:
        raise Failure(f"{where}: volume `config` is neither configMap nor projected")
    files: set[str] = set()
    external = False
    for src in sources:
        cm = configmaps.get(src["name"])
        if cm is None:
            if not src.get("optional"):
                external = True  # supplied by the operator, outside this set
            continue
        keys = set(cm.get("data") or {}) | set(cm.get("binaryData") or {})
        if "items" in src:
            for item in src["items"]:
                if item["key"] not in keys:
                    raise Failure(
                        f"{where}: volume `config` maps key {item['key']!r} of "
                        f"ConfigMap {src['name']}, which has no such key "
                        f"(the pod would not start)"
                    )
                files.add(item["path"])
        else:
            files |= keys
    return None if external else files


def check_surge(where: str, configmaps: dict[str, Any], container: dict[str, Any], ru: dict[str, Any]) -> None:
    """A surge runs two pods on a node: only DRA drivers, each instance with
    its own sockets (POD_UID from the pod's UID), can share a node."""
    kinds = set()
    for cm in configmaps.values():
        for name, text in (cm.get("data") or {}).items():
            if name.endswith(".toml") and name != "host.toml":
                kinds.add("dra" if tomllib.loads(text).get("api") == "dra" else "device-plugin")
    if kinds != {"dra"}:
        raise Failure(
            f"{where}: maxSurge must be 0 while the configuration serves device-plugin "
            "resources (two plugins on a node fight over their sockets)"
        )
    env = {e.get("name"): e for e in container.get("env", [])}
    field = env.get("POD_UID", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if field != "metadata.uid":
        raise Failure(
            f"{where}: maxSurge > 0 needs POD_UID from metadata.uid, so each instance "
            "serves its own DRA sockets"
        )
    if str(ru.get("maxUnavailable", "")) not in ("0", "0%"):
        raise Failure(f"{where}: with maxSurge, maxUnavailable must be 0 (the old pod serves until the new one is ready)")


def check_set(label: str, docs: list[dict[str, Any]]) -> None:
    configmaps = {
        d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"
    }
    namespaces = {
        d["metadata"].get("namespace")
        for d in docs
        if d.get("kind") not in CLUSTER_SCOPED
    }
    if len(namespaces) != 1 or None in namespaces:
        raise Failure(f"{label}: objects spread over namespaces {sorted(map(str, namespaces))}")

    for name, cm in configmaps.items():
        size = sum(len(k) + len(v) for k, v in (cm.get("data") or {}).items())
        size += sum(len(k) + len(v) * 3 // 4 for k, v in (cm.get("binaryData") or {}).items())
        if size > CONFIGMAP_LIMIT:
            raise Failure(f"{label}: ConfigMap {name} holds {size} bytes, over the 1 MiB object limit")
        for k, v in (cm.get("data") or {}).items():
            if "/" in k:
                raise Failure(f"{label}: ConfigMap {name}: key {k!r} contains '/'")
            if k.endswith(".toml"):
                try:
                    tomllib.loads(v)
                except tomllib.TOMLDecodeError as exc:
                    raise Failure(f"{label}: ConfigMap {name}, {k}: not TOML: {exc}") from None

    daemonsets = [d for d in docs if d.get("kind") == "DaemonSet"]
    if len(daemonsets) != 1:
        raise Failure(f"{label}: expected one DaemonSet, found {len(daemonsets)}")
    ds = daemonsets[0]
    where = f"{label}: {key(ds)}"
    spec = ds["spec"]
    tmpl = spec["template"]
    pod = tmpl["spec"]
    labels = tmpl["metadata"].get("labels", {})
    for k, v in spec["selector"]["matchLabels"].items():
        if labels.get(k) != v:
            raise Failure(f"{where}: selector {k}={v} does not match the pod template labels")
    ru = spec.get("updateStrategy", {}).get("rollingUpdate", {})
    if str(ru.get("maxSurge", 0)) not in ("0", "0%"):
        check_surge(where, configmaps, tmpl["spec"]["containers"][0], ru)
    if pod.get("priorityClassName") != "system-node-critical":
        raise Failure(f"{where}: priorityClassName is not system-node-critical")
    if pod.get("hostNetwork"):
        raise Failure(f"{where}: hostNetwork is not needed and exposes the metrics port on the node")

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    containers = pod["containers"]
    if len(containers) != 1:
        raise Failure(f"{where}: expected one container")
    c = containers[0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for probe_name, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        probe = c.get(probe_name)
        if not probe or probe.get("httpGet", {}).get("path") != path:
            raise Failure(f"{where}: {probe_name} must GET {path}")
        port = probe["httpGet"]["port"]
        if isinstance(port, str) and port not in ports:
            raise Failure(f"{where}: {probe_name} uses port {port!r}, which the container does not name")
    startup = c.get("startupProbe") or {}
    if startup.get("httpGet", {}).get("path") != "/healthz":
        raise Failure(f"{where}: startupProbe must GET /healthz (guests compile before it answers)")
    allowed = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    if allowed < STARTUP_TOLERANCE_S:
        raise Failure(f"{where}: startupProbe allows {allowed} s, less than {STARTUP_TOLERANCE_S} s of guest compilation")
    sc = c.get("securityContext") or {}
    if not sc.get("readOnlyRootFilesystem"):
        raise Failure(f"{where}: readOnlyRootFilesystem must be true")
    if not sc.get("privileged"):
        drop = (sc.get("capabilities") or {}).get("drop") or []
        added = (sc.get("capabilities") or {}).get("add") or []
        # The passthrough overlay alone adds one capability, SYS_PTRACE, to
        # read the node's mount and network tables through /proc/1
        # (docs/operator/kubevirt.md, "What binding is granted").
        allowed = PASSTHROUGH_CAPABILITIES if label.startswith("kustomize/overlays/passthrough") else []
        if "ALL" not in drop or any(cap not in allowed for cap in added):
            raise Failure(f"{where}: an unprivileged container must drop ALL capabilities and add none (passthrough: {PASSTHROUGH_CAPABILITIES} only), found {added}")
        if sc.get("allowPrivilegeEscalation") is not False:
            raise Failure(f"{where}: allowPrivilegeEscalation must be false")
        if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            raise Failure(f"{where}: seccompProfile must be RuntimeDefault")
    args = c.get("args", [])
    metrics_port = ports.get("metrics")
    if f"0.0.0.0:{metrics_port}" not in args:
        raise Failure(f"{where}: --metrics-addr does not listen on the `metrics` port {metrics_port}")
    if args[:1] != ["run"] or args[args.index("--host-root") + 1] != "/host":
        raise Failure(f"{where}: args must be `run ... --host-root /host ...`")

    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    for m in mounts.values():
        if m["name"] not in volumes:
            raise Failure(f"{where}: mount {m['mountPath']} names unknown volume {m['name']}")
    for host, inside in HOST_MOUNTS.items():
        m = mounts.get(inside)
        vol = volumes.get(m["name"]) if m else None
        if not vol or vol.get("hostPath", {}).get("path") != host:
            raise Failure(f"{where}: host {host} must be mounted at {inside}")
    tomls: dict[str, dict[str, Any]] = {}
    if CONFIG_MOUNT in mounts:
        m = mounts[CONFIG_MOUNT]
        if "subPath" in m or "subPathExpr" in m:
            raise Failure(f"{where}: the config volume is mounted with subPath, which never updates: live reload would not work")
        layout = config_layout(volumes[m["name"]], configmaps, where)
        if layout is not None:
            for src_cm in configmaps.values():
                for k, v in (src_cm.get("data") or {}).items():
                    if k in layout and k.endswith(".toml"):
                        tomls[k] = tomllib.loads(v)
            for fname, doc in tomls.items():
                for hook, hcfg in (doc.get("hooks") or {}).items():
                    guest = hcfg.get("guest") if isinstance(hcfg, dict) else None
                    if not guest:
                        continue
                    # Absolute paths elsewhere come from a guest image
                    # (validate_guest_image); under the config mount they
                    # are files of the config volume like relative ones.
                    if guest.startswith("/"):
                        if not guest.startswith(CONFIG_MOUNT + "/"):
                            continue
                        guest = guest[len(CONFIG_MOUNT) + 1:]
                    if guest not in layout:
                        raise Failure(
                            f"{where}: {fname} [hooks.{hook}] names guest {guest!r}, "
                            f"which the config volume does not contain (it has: {sorted(layout)})"
                        )
    ok(f"{label}: DaemonSet, volumes and ConfigMaps consistent")
    guest_image = check_guest_sources(where, pod, c, tomls, Failure)
    if guest_image:
        ok(f"{label}: {guest_image}: mounted where the config names them")
    dra = check_dra(label, docs, Failure)
    if dra:
        ok(dra)


DRIFT_FIELDS_POD = [
    "priorityClassName",
    "nodeSelector",
    "tolerations",
    "terminationGracePeriodSeconds",
    "automountServiceAccountToken",
]
DRIFT_FIELDS_CONTAINER = [
    "args",
    "env",
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "resources",
    "securityContext",
    "volumeMounts",
    "imagePullPolicy",
]


def check_drift(base: list[dict[str, Any]], chart: list[dict[str, Any]]) -> None:
    (kds,) = [d for d in base if d["kind"] == "DaemonSet"]
    (hds,) = [d for d in chart if d["kind"] == "DaemonSet"]
    diffs = []
    for f in ("updateStrategy", "minReadySeconds"):
        if kds["spec"].get(f) != hds["spec"].get(f):
            diffs.append(f"spec.{f}")
    if kds["spec"]["template"]["metadata"].get("annotations") != hds["spec"]["template"]["metadata"].get("annotations"):
        diffs.append("pod annotations")
    kp, hp = kds["spec"]["template"]["spec"], hds["spec"]["template"]["spec"]
    for f in DRIFT_FIELDS_POD:
        if normalize(kp.get(f)) != normalize(hp.get(f)):
            diffs.append(f"pod {f}")
    kc, hc = kp["containers"][0], hp["containers"][0]
    for f in DRIFT_FIELDS_CONTAINER:
        if normalize(kc.get(f)) != normalize(hc.get(f)):
            diffs.append(f"container {f}")
    kv = {v["name"]: v for v in kp["volumes"] if v["name"] != "config"}
    hv = {v["name"]: v for v in hp["volumes"] if v["name"] != "config"}
    if kv != hv:
        diffs.append("volumes (other than config)")
    if diffs:
        raise Failure(
            "the chart's default DaemonSet and deploy/kustomize/base differ in: "
            + ", ".join(diffs)
            + " (change both, or make the difference a value)"
        )
    ok("chart defaults agree with deploy/kustomize/base")


# --------------------------------------------------------------- monitoring


def check_monitoring(label: str, docs: list[dict[str, Any]], pod_labels: dict[str, str] | None) -> None:
    """PodMonitor selects the plugin's pods on `metrics`; rules are non-empty."""
    if not any(d.get("apiVersion", "").startswith(MONITORING_GROUP) for d in docs):
        return
    for d in docs:
        if not d.get("apiVersion", "").startswith(MONITORING_GROUP):
            continue
        where = f"{label}: {key(d)}"
        if d["kind"] == "PodMonitor":
            sel = d["spec"]["selector"]["matchLabels"]
            if pod_labels is not None and any(pod_labels.get(k) != v for k, v in sel.items()):
                raise Failure(f"{where}: selector {sel} does not match the plugin's pod labels {pod_labels}")
            ports = [e.get("port") for e in d["spec"]["podMetricsEndpoints"]]
            if ports != ["metrics"]:
                raise Failure(f"{where}: must scrape the port named `metrics`, not {ports}")
        elif d["kind"] == "PrometheusRule":
            rules = [r for g in d["spec"]["groups"] for r in g["rules"]]
            if not rules or any("alert" not in r or "expr" not in r for r in rules):
                raise Failure(f"{where}: every rule must be an alert with an expr")
        else:
            raise Failure(f"{where}: unexpected kind")
    ok(f"{label}: monitoring objects consistent")


def check_monitoring_drift(deploy: Path, sets: dict[str, list[dict[str, Any]]]) -> None:
    mon = sets.get("kustomize/monitoring")
    chart_files = deploy / "helm" / "wasm-device-plugin" / "files"
    if mon is None:
        raise Failure("kustomize/monitoring did not render")
    (rule,) = [d for d in mon if d["kind"] == "PrometheusRule"]
    plain = yaml.safe_load((chart_files / "prometheus-rules.yaml").read_text())
    if rule["spec"] != plain:
        raise Failure(
            "deploy/kustomize/monitoring/prometheusrule.yaml and "
            "deploy/helm/wasm-device-plugin/files/prometheus-rules.yaml hold different rules"
        )
    (dash,) = [d for d in mon if d["kind"] == "ConfigMap"]
    if dash["data"]["wasm-device-plugin.json"] != (chart_files / "grafana-dashboard.json").read_text():
        raise Failure(
            "deploy/kustomize/monitoring/grafana-dashboard.json and the chart's "
            "files/grafana-dashboard.json differ"
        )
    json.loads(dash["data"]["wasm-device-plugin.json"])
    ok("monitoring: chart rules and dashboard agree with deploy/kustomize/monitoring")


# ------------------------------------------------------------------ schemas


def validate_schemas(files: list[Path], versions: list[str], kv: str, what: str = "") -> None:
    for version in versions:
        proc = subprocess.run(
            [kv, "--strict", "--kubernetes-version", version, *map(str, files)],
            capture_output=True,
            text=True,
        )
        lines = (proc.stdout + proc.stderr).splitlines()
        bad = [l for l in lines if l.startswith(("ERROR", "WARN"))]
        if proc.returncode != 0 or bad:
            fail(
                f"kubernetes-validate --strict against {version}:\n  "
                + "\n  ".join(bad or lines)
            )
        else:
            n = sum(1 for l in lines if l.startswith("INFO") and " passed " in l)
            ok(f"Kubernetes {version} schemas (strict): {n} {what}objects in {len(files)} renders valid")


def base_pod_labels(sets: dict[str, list[dict[str, Any]]]) -> dict[str, str] | None:
    base = sets.get("kustomize/base") or []
    for d in base:
        if d.get("kind") == "DaemonSet":
            return d["spec"]["template"]["metadata"]["labels"]
    return None


# --------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deploy-dir", type=Path, required=True)
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument(
        "--kubectl",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="a kubectl to render kustomizations with; repeatable",
    )
    ap.add_argument("--kubernetes-validate", required=True)
    ap.add_argument("--versions", required=True, help="space-separated, e.g. '1.29.0 1.32.0'")
    ap.add_argument("--dra-versions", default="1.34.0 1.37.0",
                    help="versions to validate resource.k8s.io/v1 objects against (1.34 and later)")
    ap.add_argument("--image-volume-versions", default="1.31.0 1.33.0",
                    help="versions to validate renders with an image volume (volumes[].image, 1.31 and later) "
                         "against, beside those of --versions from 1.31 on")
    ap.add_argument("--no-helm", action="store_true")
    args = ap.parse_args()

    deploy: Path = args.deploy_dir.resolve()
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.yaml"):
        old.unlink()
    renderers = [tuple(s.split("=", 1)) for s in args.kubectl]
    if not renderers:
        print("validate.py: no kubectl given", file=sys.stderr)
        return 2

    rendered: list[Path] = []
    sets: dict[str, list[dict[str, Any]]] = {}

    # 1. kustomize
    kdirs = sorted(p.parent for p in (deploy / "kustomize").rglob("kustomization.yaml"))
    for kdir in kdirs:
        rel = kdir.relative_to(deploy / "kustomize")
        label = f"kustomize/{rel}"
        try:
            first: list[dict[str, Any]] | None = None
            for rlabel, kubectl in renderers:
                text, warnings = render_kustomize(kubectl, kdir)
                name = f"kustomize-{'-'.join(rel.parts)}.{rlabel}.yaml"
                (out / name).write_text(text)
                rendered.append(out / name)
                docs = load_docs(text)
                for w in warnings.splitlines():
                    if w.strip():
                        print(f"      {label} ({rlabel}): {w}")
                if first is None:
                    first = docs
                    first_label = rlabel
                    continue
                a = sorted((key(d), json.dumps(normalize(d), sort_keys=True)) for d in first)
                b = sorted((key(d), json.dumps(normalize(d), sort_keys=True)) for d in docs)
                if a != b:
                    only = sorted({k for k, _ in set(a) ^ set(b)})
                    raise Failure(
                        f"{label}: kubectl {first_label} and kubectl {rlabel} render "
                        f"different objects: {', '.join(only)}"
                    )
            assert first is not None
            ok(f"{label}: rendered by {', '.join('kubectl ' + r for r, _ in renderers)}"
               f" ({len(first)} objects{', identical' if len(renderers) > 1 else ''})")
            sets[label] = first
            if any(d.get("kind") == "DaemonSet" for d in first):
                check_set(label, first)
            check_monitoring(label, first, base_pod_labels(sets))
        except (Failure, KeyError, ValueError, IndexError) as exc:
            fail(f"{label}: {exc}" if not isinstance(exc, Failure) else str(exc))

    # 2. helm
    charts = sorted(p.parent for p in (deploy / "helm").glob("*/Chart.yaml")) if (deploy / "helm").is_dir() else []
    if charts and args.no_helm:
        fail("Helm charts exist but no Helm renderer is available")
        charts = []
    for chart in charts:
        for values_file in [None, *sorted((chart / "ci").glob("*-values.yaml"))]:
            vlabel = values_file.stem if values_file else "defaults"
            label = f"helm/{chart.name} ({vlabel})"
            try:
                text = render_helm(chart, values_file, "wasm-device-plugin")
                name = f"helm-{chart.name}-{vlabel}.yaml"
                (out / name).write_text(text)
                rendered.append(out / name)
                docs = load_docs(text)
                sets[label] = docs
                ok(f"{label}: helm lint --strict clean, rendered ({len(docs)} objects)")
                check_set(label, docs)
                (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
                check_monitoring(label, docs, ds["spec"]["template"]["metadata"]["labels"])
            except (Failure, KeyError, ValueError, IndexError) as exc:
                fail(f"{label}: {exc}" if not isinstance(exc, Failure) else str(exc))
        dra_values = chart / "ci" / "dra-values.yaml"
        if dra_values.is_file():
            try:
                check_surge_refused(chart, dra_values)
                ok(f"helm/{chart.name}: a surge upgrade with a device-plugin resource is refused, naming it")
            except Failure as exc:
                fail(str(exc))
        base = sets.get("kustomize/base")
        default = sets.get(f"helm/{chart.name} (defaults)")
        if base and default:
            try:
                check_drift(base, default)
            except Failure as exc:
                fail(str(exc))
    try:
        check_monitoring_drift(deploy, sets)
    except (Failure, KeyError, ValueError) as exc:
        fail(str(exc))

    # 3. schemas, for everything but the Prometheus Operator's kinds
    if rendered:
        core_dir = out / "schema-input"
        core_dir.mkdir(exist_ok=True)
        for old in core_dir.glob("*.yaml"):
            old.unlink()
        core_files = []
        image_volume_files = []
        dra_files = []
        for path in rendered:
            docs = [d for d in load_docs(path.read_text()) if not d.get("apiVersion", "").startswith(MONITORING_GROUP)]
            core_docs = [d for d in docs if not is_dra_object(d)]
            dra_docs = [d for d in docs if is_dra_object(d)]
            if core_docs:
                core = core_dir / path.name
                core.write_text(yaml.safe_dump_all(core_docs, sort_keys=False))
                # volumes[].image is unknown to the schemas before 1.31.
                if any(has_image_volume(d) for d in core_docs):
                    image_volume_files.append(core)
                else:
                    core_files.append(core)
            if dra_docs:
                dra = core_dir / f"dra-{path.name}"
                dra.write_text(yaml.safe_dump_all(dra_docs, sort_keys=False))
                dra_files.append(dra)
        validate_schemas(core_files, args.versions.split(), args.kubernetes_validate)
        if image_volume_files:
            iv_versions = sorted(
                {v for v in args.versions.split() if version_tuple(v) >= IMAGE_VOLUME_SINCE}
                | set(args.image_volume_versions.split()),
                key=version_tuple,
            )
            skipped = [v for v in args.versions.split() if version_tuple(v) < IMAGE_VOLUME_SINCE]
            if skipped:
                print(f"      {len(image_volume_files)} renders with an image volume (Kubernetes 1.31+) "
                      f"not validated against {', '.join(skipped)}")
            if not iv_versions:
                fail("renders with an image volume, but no Kubernetes version from 1.31 on to validate them against")
            else:
                validate_schemas(image_volume_files, iv_versions, args.kubernetes_validate, "image-volume ")
        # resource.k8s.io/v1 (DeviceClass) exists from Kubernetes 1.34 on.
        if dra_files:
            validate_schemas(dra_files, args.dra_versions.split(), args.kubernetes_validate, "resource.k8s.io/v1 ")

    print(f"rendered manifests: {out}")
    if failures:
        print(f"\ndeploy/validate.sh: {len(failures)} check(s) failed:", file=sys.stderr)
        for f in failures:
            print(f"  - {f.splitlines()[0]}", file=sys.stderr)
    print(f"validate: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
