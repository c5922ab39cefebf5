#!/usr/bin/env python3
"""Memory of a wasm-device-plugin binary on the shipped config: idle RSS and
a reload storm, side by side for several builds or allocator settings.

    tools/image-memory.py [--storm | --short-storm] VARIANT...
    tools/image-memory.py --image-rootfs target/image/rootfs \\
        --archive target/image/wasm-device-plugin.oci.tar \\
        [--budget-idle-mib 15] [--budget-peak-mib 48] [--short-storm]

A VARIANT is NAME=BINARY[:ENV=VALUE,ENV=VALUE...]. Each runs alone, one
after the other, with an environment of its own (PATH, RUST_LOG=error and the
variant's ENV pairs; no MIMALLOC_* from the caller), in a fresh folder:

- the config: the repository's config/*.toml and config/guests/*.wasm
  (or the image's /etc/wasm-device-plugin/config with --image-rootfs), laid
  out as the kubelet lays out a ConfigMap volume (files behind `..data`, a
  symlink swapped atomically), with `precompiled-cache-dir` moved into the
  folder; every variant starts with that cache empty, as a new pod does;
- a host root with the nodes the shipped resources select (/dev/fuse,
  /dev/kvm, /dev/net/tun, /dev/loop0-7);
- `run --registration plugin-watcher`: every resource is served on its
  socket and its guests are loaded and run (health every poll), with no
  kubelet needed (none dials in: no ListAndWatch stream).

Figures, from /proc/PID/status: idle = VmRSS (RssAnon, RssFile) 3 s after
the fourth resource's socket appears. --storm then swaps the config 400
times (246 edits of one resource's `env-prefix`, 100 edits of all four
files, 19 new builds of a guest, 35 swaps of a file's formatting only),
5-40 ms apart, measures the peak (VmHWM, reset before the storm through
clear_refs) and, 4 s after the last swap, the RSS back at rest; then 100
swaps that each change only `env-prefix` (no new guest), 30 ms apart, and
the RSS change 4 s after them. --short-storm: 60 swaps (3 new guest builds),
for CI.

With --image-rootfs the image's own binary, config and environment (read
from --archive's image config) are measured; --budget-* make the run fail,
saying what was over, when a figure is above its budget.

Standard library only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESOURCES = 4


def status(pid: int) -> dict[str, int]:
    """The kB fields of /proc/PID/status, in KiB."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if value.endswith(" kB"):
            out[key] = int(value[:-3])
        elif key == "Threads":
            out[key] = int(value)
    return out


def mib(kib: int) -> float:
    return kib / 1024.0


def leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def with_tag(component: bytes, tag: int) -> bytes:
    """The component with a custom section appended: new bytes (a new
    build to the host, compiled again), the same behaviour."""
    name = b"wdp-memory-tag"
    body = leb128(len(name)) + name + tag.to_bytes(4, "little")
    return component + b"\x00" + leb128(len(body)) + body


class ConfigVolume:
    """A config folder as the kubelet writes a ConfigMap volume: every
    entry a symlink through `..data` to a timestamped folder, updated by
    writing a new folder and renaming a new `..data` symlink over the old."""

    def __init__(self, path: Path, files: dict[str, bytes]):
        self.path = path
        self.generation = 0
        path.mkdir(parents=True)
        self.current: Path | None = None
        self.swap(files)
        for name in sorted({n.split("/")[0] for n in files}):
            (path / name).symlink_to(f"..data/{name}")

    def swap(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        new = self.path / f"..2026_01_01_00_00_00.{self.generation:06d}"
        for name, data in files.items():
            target = new / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        tmp = self.path / "..data_tmp"
        tmp.symlink_to(new.name)
        os.rename(tmp, self.path / "..data")
        if self.current is not None:
            shutil.rmtree(self.current)
        self.current = new


def shipped_files(config_dir: Path, cache: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for toml in sorted(config_dir.glob("*.toml")):
        text = toml.read_text()
        if toml.name == "host.toml":
            text = "\n".join(
                f'precompiled-cache-dir = "{cache}"' if line.startswith("precompiled-cache-dir") else line
                for line in text.splitlines()
            ) + "\n"
        files[toml.name] = text.encode()
    for wasm in sorted((config_dir / "guests").glob("*.wasm")):
        files[f"guests/{wasm.name}"] = wasm.read_bytes()
    return files


def edited(files: dict[str, bytes], name: str, old: bytes, new: bytes) -> dict[str, bytes]:
    out = dict(files)
    assert old in out[name], f"{old!r} not in {name}"
    out[name] = out[name].replace(old, new)
    return out


class Run:
    def __init__(self, name: str, binary: str, env: dict[str, str], config_dir: Path):
        self.name, self.binary = name, binary
        self.tmp = Path(tempfile.mkdtemp(prefix="wdp-memory."))
        root = self.tmp / "root"
        for node in ["dev/fuse", "dev/kvm", "dev/net/tun", *(f"dev/loop{i}" for i in range(8))]:
            (root / node).parent.mkdir(parents=True, exist_ok=True)
            (root / node).write_bytes(b"")
        cache = self.tmp / "cache"
        cache.mkdir(mode=0o700)
        self.base = shipped_files(config_dir, cache)
        self.config = ConfigVolume(self.tmp / "config", self.base)
        self.plugins = self.tmp / "device-plugins"
        self.registry = self.tmp / "plugins_registry"
        for d in (self.plugins, self.registry):
            d.mkdir()
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RUST_LOG": "error", **env}
        self.log = open(self.tmp / "log", "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [binary, "run", "--registration", "plugin-watcher",
             "--plugins-registry-dir", str(self.registry),
             "--config-dir", str(self.tmp / "config"),
             "--device-plugin-dir", str(self.plugins),
             "--host-root", str(root),
             "--cdi-dir", str(self.tmp / "cdi"),
             "--state-dir", str(self.tmp / "state"),
             "--plugins-dir", str(self.tmp / "plugins")],
            env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def fail(self, why: str) -> None:
        self.stop()
        sys.stderr.write((self.tmp / "log").read_text(errors="replace")[-4000:])
        raise SystemExit(f"image-memory: {self.name}: {why}")

    def wait_served(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.fail(f"exited with status {self.proc.returncode} before serving")
            socks = [p for p in self.plugins.iterdir() if p.name.endswith(".sock")]
            if len(socks) >= RESOURCES:
                return time.monotonic() - self.started
            time.sleep(0.02)
        self.fail(f"fewer than {RESOURCES} resource sockets after {timeout:.0f} s")
        return 0.0

    def status(self) -> dict[str, int]:
        if self.proc.poll() is not None:
            self.fail(f"exited with status {self.proc.returncode}")
        return status(self.proc.pid)

    def reset_peak(self) -> None:
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def storm_plan(base: dict[str, bytes], swaps: int, guest_builds: int, seed: int):
    """The config of each swap, in order."""
    rng = random.Random(seed)
    guest = "guests/numa-packing.wasm"
    tomls = [n for n in base if n.endswith(".toml") and n != "host.toml"]
    kinds = ["guest"] * guest_builds
    all_four = swaps // 4
    reformat = swaps // 12
    kinds += ["all"] * all_four + ["format"] * reformat
    kinds += ["prefix"] * (swaps - len(kinds))
    rng.shuffle(kinds)
    current = dict(base)
    plan = []
    for i, kind in enumerate(kinds):
        if kind == "guest":
            current = dict(current)
            current[guest] = with_tag(base[guest], i)
        elif kind == "prefix":
            current = edited(base, "loop.toml", b'env-prefix = "LOOP"', f'env-prefix = "LOOP{i}"'.encode()) | {
                guest: current[guest]}
        elif kind == "all":
            current = dict(current)
            for name in tomls:
                current[name] = base[name] + f"\n# edit {i}\n".encode()
            current["loop.toml"] = current["loop.toml"].replace(b'env-prefix = "LOOP"', f'env-prefix = "L{i}"'.encode())
        else:
            current = dict(current)
            current["fuse.toml"] = base["fuse.toml"] + b"\n" * (1 + i % 3)
        plan.append(current)
    return plan


def settle(run: Run, seconds: float) -> dict[str, int]:
    time.sleep(seconds)
    return run.status()


def save_smaps(run: "Run", smaps_dir: Path | None, when: str) -> None:
    if smaps_dir is not None:
        smaps_dir.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() else "-" for c in run.name)
        shutil.copyfile(f"/proc/{run.proc.pid}/smaps", smaps_dir / f"{name}.{when}.smaps")


def measure(name: str, binary: str, env: dict[str, str], config_dir: Path, storm: str | None,
            ready_timeout: float, smaps_dir: Path | None = None, late: float = 0.0) -> dict:
    run = Run(name, binary, env, config_dir)
    try:
        ready_s = run.wait_served(ready_timeout)
        idle = settle(run, 3.0)
        save_smaps(run, smaps_dir, "idle")
        out = {"name": name, "binary": binary, "env": env, "ready_s": round(ready_s, 3),
               "idle_kib": idle.get("VmRSS", 0), "idle_anon_kib": idle.get("RssAnon", 0),
               "idle_file_kib": idle.get("RssFile", 0), "threads": idle.get("Threads", 0),
               "startup_peak_kib": idle.get("VmHWM", 0)}
        if storm:
            swaps, builds = (400, 19) if storm == "full" else (60, 3)
            plan = storm_plan(run.base, swaps, builds, seed=52)
            run.reset_peak()
            before, before_anon = run.status()["VmRSS"], run.status()["RssAnon"]
            rng = random.Random(7)
            t0 = time.monotonic()
            peak_anon = 0
            for files in plan:
                run.config.swap(files)
                time.sleep(rng.uniform(0.005, 0.040))
                peak_anon = max(peak_anon, run.status().get("RssAnon", 0))
            storm_s = time.monotonic() - t0
            # Wait for the last compile and swap, then for the allocator to settle.
            for _ in range(40):
                time.sleep(0.1)
                peak_anon = max(peak_anon, run.status().get("RssAnon", 0))
            end = run.status()
            save_smaps(run, smaps_dir, "after-storm")
            out.update({"storm_swaps": swaps, "storm_guest_builds": builds, "storm_s": round(storm_s, 1),
                        "storm_before_kib": before, "storm_before_anon_kib": before_anon, "storm_peak_anon_kib": peak_anon, "storm_peak_kib": end.get("VmHWM", 0),
                        "storm_end_kib": end.get("VmRSS", 0), "storm_end_anon_kib": end.get("RssAnon", 0)})
            if late:
                later = settle(run, late)
                out.update({"late_s": late, "storm_late_kib": later.get("VmRSS", 0),
                            "storm_late_anon_kib": later.get("RssAnon", 0)})
                end = later
            if storm == "full":
                base_prefix = plan[-1]
                for i in range(100):
                    run.config.swap(edited(base_prefix, "loop.toml", b'env-prefix = "', f'env-prefix = "P{i}'.encode()))
                    time.sleep(0.030)
                after = settle(run, 4.0)
                out.update({"prefix_edits_after_kib": after.get("VmRSS", 0),
                            "prefix_edits_anon_delta_kib": after.get("RssAnon", 0) - end.get("RssAnon", 0),
                            "prefix_edits_delta_kib": after.get("VmRSS", 0) - end.get("VmRSS", 0)})
        run.stop()
        # The guests compiled into the cache: proof the storm's builds were served.
        out["exit_status"] = run.proc.returncode
        return out
    finally:
        run.stop()
        run.cleanup()


def print_table(results: list[dict], storm: str | None) -> None:
    print(f"{'variant':<34} {'ready':>6} {'idle RSS':>9} {'anon':>6} {'file':>6} {'thr':>4}", end="")
    if storm:
        print(f" | storm RSS (anon): {'before':>11} {'peak':>11} {'end':>11} {'end-before':>12}", end="")
        if storm == "full":
            print(f" | 100 prefix edits", end="")
    print()
    for r in results:
        print(f"{r['name']:<34} {r['ready_s']:>5.2f}s {mib(r['idle_kib']):>8.1f}M {mib(r['idle_anon_kib']):>5.1f}M "
              f"{mib(r['idle_file_kib']):>5.1f}M {r['threads']:>4}", end="")
        if storm:
            pair = lambda a, b: f"{mib(a):5.1f} ({mib(b):4.1f})"
            print(f" |                   {pair(r['storm_before_kib'], r['storm_before_anon_kib'])} "
                  f"{pair(r['storm_peak_kib'], r['storm_peak_anon_kib'])} "
                  f"{pair(r['storm_end_kib'], r['storm_end_anon_kib'])} "
                  f"{mib(r['storm_end_kib'] - r['storm_before_kib']):+5.1f} ({mib(r['storm_end_anon_kib'] - r['storm_before_anon_kib']):+4.1f})", end="")
            if "late_s" in r:
                print(f" | +{r['late_s']:.0f}s {pair(r['storm_late_kib'], r['storm_late_anon_kib'])}", end="")
            if storm == "full":
                print(f" | {mib(r['prefix_edits_delta_kib']):+5.1f} ({mib(r['prefix_edits_anon_delta_kib']):+4.1f})", end="")
        print()


def image_env(archive: Path) -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("oci_image", REPO / "deploy/oci-image.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    env = {}
    for pair in module.Archive(archive).config()["config"].get("Env") or []:
        key, _, value = pair.partition("=")
        if key != "PATH":
            env[key] = value
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="*", help="NAME=BINARY[:ENV=VALUE,...]")
    ap.add_argument("--storm", action="store_const", const="full", dest="storm")
    ap.add_argument("--short-storm", action="store_const", const="short", dest="storm")
    ap.add_argument("--image-rootfs", type=Path, help="measure the unpacked image's binary and config")
    ap.add_argument("--archive", type=Path, help="the image archive whose Env the binary runs with")
    ap.add_argument("--config-dir", type=Path, default=REPO / "config")
    ap.add_argument("--repeat", type=int, default=1, help="run the variants this many times, interleaved")
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--budget-idle-mib", type=float)
    ap.add_argument("--budget-peak-mib", type=float)
    ap.add_argument("--budget-back-mib", type=float, help="storm end RSS minus its start")
    ap.add_argument("--budget-idle-anon-mib", type=float, help="idle RssAnon (the heap: the allocator's share)")
    ap.add_argument("--budget-peak-anon-mib", type=float, help="highest RssAnon sampled during the storm")
    ap.add_argument("--budget-back-anon-mib", type=float, help="storm end RssAnon minus its start")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--late", type=float, default=0.0,
                    help="also read the RSS this many seconds after the storm's 4 s")
    ap.add_argument("--smaps", type=Path, help="save /proc/PID/smaps at idle and after the storm here")
    args = ap.parse_args()

    variants: list[tuple[str, str, dict[str, str], Path]] = []
    if args.image_rootfs:
        env = image_env(args.archive) if args.archive else {}
        variants.append(("image's binary" + "".join(f" {k}={v}" for k, v in env.items()),
                         str(args.image_rootfs / "usr/local/bin/wasm-device-plugin"), env,
                         args.image_rootfs / "etc/wasm-device-plugin/config"))
    for spec in args.variants:
        name, _, rest = spec.partition("=")
        binary, _, envs = rest.partition(":")
        env = dict(pair.split("=", 1) for pair in envs.split(",") if pair)
        variants.append((name, binary, env, args.config_dir))
    if not variants:
        ap.error("nothing to measure: give VARIANTs or --image-rootfs")

    results = []
    for _ in range(args.repeat):
        for name, binary, env, config_dir in variants:
            results.append(measure(name, binary, env, config_dir, args.storm, args.ready_timeout, args.smaps, args.late))
    print(f"shipped config (4 resources, 4 guests), registration plugin-watcher; "
          f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    print_table(results, args.storm)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))

    over = []
    for r in results:
        def check(budget, kib, what):
            if budget is not None and mib(kib) > budget:
                over.append(f"{r['name']}: {what} {mib(kib):.1f} MiB is over its budget of {budget:g} MiB")
        check(args.budget_idle_anon_mib, r["idle_anon_kib"], "idle RssAnon")
        if args.storm:
            check(args.budget_peak_anon_mib, r["storm_peak_anon_kib"], "reload-storm peak RssAnon")
            check(args.budget_back_anon_mib, r["storm_end_anon_kib"] - r["storm_before_anon_kib"],
                  "RssAnon after the reload storm, above its level before it,")
        if args.budget_idle_mib is not None and mib(r["idle_kib"]) > args.budget_idle_mib:
            over.append(f"{r['name']}: idle RSS {mib(r['idle_kib']):.1f} MiB is over the budget of "
                        f"{args.budget_idle_mib:g} MiB (anon {mib(r['idle_anon_kib']):.1f} MiB)")
        if args.storm and args.budget_peak_mib is not None and mib(r["storm_peak_kib"]) > args.budget_peak_mib:
            over.append(f"{r['name']}: reload-storm peak {mib(r['storm_peak_kib']):.1f} MiB is over the budget of "
                        f"{args.budget_peak_mib:g} MiB")
        if args.storm and args.budget_back_mib is not None and \
                mib(r["storm_end_kib"] - r["storm_before_kib"]) > args.budget_back_mib:
            over.append(f"{r['name']}: RSS after the reload storm is {mib(r['storm_end_kib'] - r['storm_before_kib']):.1f} MiB "
                        f"above its level before it (budget {args.budget_back_mib:g} MiB)")
    for line in over:
        print(f"image-memory: OVER BUDGET: {line}", file=sys.stderr)
    if over:
        print("image-memory: the image's binary holds more memory than its budget (docs/performance.md, "
              "'Memory of the image's binary', says where it goes and how it was brought down)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
