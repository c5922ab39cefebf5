#!/usr/bin/env python3
"""Fail when an alert rule or the Grafana dashboard queries a metric that a
live scrape of the plugin does not expose.

    check-metric-names.py --scrape SCRAPE.prom RULES.yaml... DASHBOARD.json...

SCRAPE is a /metrics answer in the Prometheus text format. A metric exists
when the scrape has a sample of that name or declares its family (`# TYPE`;
a histogram family also provides `_bucket`, `_sum` and `_count`, a counter
family `_total`), so a
counter that has not counted yet still counts as present. Only names with
the plugin's prefix are checked: `up` and the like come from Prometheus.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

PREFIX = "wasm_device_plugin_"
NAME = re.compile(r"\b" + PREFIX + r"[a-zA-Z0-9_]*")


def exposed(scrape: str) -> set[str]:
    names: set[str] = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            if kind.strip() in ("histogram", "summary"):
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            elif kind.strip() == "counter":
                # OpenMetrics names a counter's family without the
                # `_total` its samples carry.
                names.add(f"{name}_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def queries(path: Path) -> list[tuple[str, str]]:
    """(where, PromQL) for every query in a rule file or a dashboard."""
    out: list[tuple[str, str]] = []
    if path.suffix == ".json":
        def walk(node: object, where: str) -> None:
            if isinstance(node, dict):
                title = node.get("title") or node.get("name") or where
                for k, v in node.items():
                    if k in ("expr", "query", "definition") and isinstance(v, str):
                        out.append((f"{path.name}: {title}", v))
                    else:
                        walk(v, title if isinstance(title, str) else where)
            elif isinstance(node, list):
                for v in node:
                    walk(v, where)
        walk(json.loads(path.read_text()), path.name)
    else:
        doc = yaml.safe_load(path.read_text())
        groups = doc.get("groups") or (doc.get("spec") or {}).get("groups") or []
        for g in groups:
            for r in g["rules"]:
                out.append((f"{path.name}: {r.get('alert') or r.get('record')}", r["expr"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrape", type=Path, required=True)
    ap.add_argument("files", type=Path, nargs="+")
    args = ap.parse_args()
    have = exposed(args.scrape.read_text())
    missing = []
    used: set[str] = set()
    for f in args.files:
        qs = queries(f)
        if not qs:
            missing.append(f"{f}: no queries found")
        for where, expr in qs:
            for name in NAME.findall(expr):
                used.add(name)
                if name not in have:
                    missing.append(f"{where}: {name} is not in the scrape")
    for m in missing:
        print(f"FAIL  {m}", file=sys.stderr)
    print(f"metric names: {len(used)} used by {len(args.files)} files, "
          f"{len(used - have)} missing from the live scrape")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
