#!/usr/bin/env python3
"""wasm-device-plugin ("ours") and squat/generic-device-plugin ("the peer") on
the same work, in one run, through one kubelet stand-in (standin.py: grpcio on
proto/deviceplugin/v1beta1/api.proto), side by side with ratios.

    python3 tools/side-by-side/compare.py [--ours BIN] [--peer BIN]
        [--sizes 8,128] [--rounds 3] [--allocs 200] [--settle-s 5]
        [--removals 1] [--restarts 1] [--seed 1] [--nodes file|char]
        [--json OUT.json] [--keep] [--setup-only]

Everything it fetches or builds goes to a cache outside the clone,
${XDG_CACHE_HOME:-~/.cache}/wasm-device-plugin-peer:

- venv/: a virtual environment with grpcio and grpcio-tools (pip); the script
  re-runs itself with that interpreter;
- stubs/: the Python modules protoc generates from the repository's proto;
- peer/<version>/generic-device-plugin: the peer, `go install`ed from the Go
  module proxy at --peer-version (unless --peer BIN is given).

Ours is `cargo build --release -p wasm-device-plugin` in this clone, unless
--ours BIN is given.

The work, per plugin, size N and round: a fresh scratch folder holding a host
root with N device nodes dev/acc0 ... dev/acc{N-1} (plain files by default,
character devices with --nodes char, which needs root), an empty
device-plugin folder where the stand-in serves kubelet.sock, and one resource
`example.com/acc` selecting them: ours from a resource file
(`[[nodes]] path = "/dev/acc*"`) with `--host-root`, `--registration kubelet`
and no host.toml (its default 5 s poll); the peer from `--device` with the
absolute glob and `--domain example.com` (its device check is every 5 s).
Both get a metrics listener on a free 127.0.0.1 port, a clean environment and
an empty working folder (the peer reads ./config.yaml and its flags from the
environment). Plugins alternate which goes first, round by round and size by
size. Measured, each run:

- start -> registered: from just before the spawn to the stand-in's Register;
- start -> N healthy listed: to the first ListAndWatch update with N healthy;
- idle CPU: CPU time of every thread (/proc/PID/task/*/schedstat) from the
  full list to the end of the settle window;
- RSS and USS (/proc/PID/smaps_rollup) --settle-s after registration, no call
  in between; RSS again after the Allocate calls;
- Allocate of one device, p50 and p99 of --allocs client round trips (10
  warm-up calls not counted), cycling through the listed IDs;
- hot-plug, --removals times: after a pause of 0-5 s, the last node is
  unlinked; the time until an update lists N-1 healthy; after another pause
  it is made again; the time until N healthy (the pauses sample the phase of
  a 5 s poll; they come from --seed, the same for both plugins in a round);
- kubelet restart, --restarts times: the stand-in stops serving, empties the
  folder of its sockets and serves kubelet.sock again; the time from serving
  again to the next Register, and to that registration's first full list;
- SIGTERM -> exit: a thread blocked in waitpid() takes the exit's time, so
  the figure has no polling steps.

Prints a markdown table (median, min-max over the rounds, ours/peer of the
medians); --json writes every sample with the machine and settings. Only the
processes it started are signalled, by PID.
"""
import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PEER_MODULE = "github.com/squat/generic-device-plugin"
# The module has no tagged release; this is the proxy's @latest when the tool
# was written. Another version: --peer-version (a pseudo-version, a commit).
PEER_VERSION = "v0.0.0-20260515115838-2cc50b05d4d2"
PYTHON_PACKAGES = ["grpcio==1.85.1", "grpcio-tools==1.85.1"]
RESOURCE = "example.com/acc"
WARMUP_CALLS = 10


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "wasm-device-plugin-peer")


def say(*parts):
    print(*parts, file=sys.stderr, flush=True)


# ----- setting up: the venv, the peer, ours ------------------------------------------------
def enter_venv(cache):
    """Re-runs this script with the cache's venv (made on first use)."""
    venv = os.path.join(cache, "venv")
    python = os.path.join(venv, "bin", "python3")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    stamp = os.path.join(venv, "side-by-side-packages")
    wanted = "\n".join(PYTHON_PACKAGES)
    if not os.path.exists(stamp) or open(stamp).read() != wanted:
        say(f"setting up {venv} ({', '.join(PYTHON_PACKAGES)})")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *PYTHON_PACKAGES], check=True)
        with open(stamp, "w") as f:
            f.write(wanted)
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def build_peer(cache, version):
    gobin = os.path.join(cache, "peer", version)
    binary = os.path.join(gobin, "generic-device-plugin")
    if os.path.exists(binary):
        return binary
    if shutil.which("go") is None:
        sys.exit("building the peer needs a Go toolchain (`go` on PATH), or pass --peer BIN")
    os.makedirs(gobin, exist_ok=True)
    cmd = ["nice", "go", "install", f"{PEER_MODULE}@{version}"]
    say(f"building the peer: GOBIN={gobin} {' '.join(cmd[1:])}")
    env = dict(os.environ, GOBIN=gobin)
    done = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0 or not os.path.exists(binary):
        sys.exit(f"`go install {PEER_MODULE}@{version}` failed (exit {done.returncode}):\n"
                 f"{done.stdout[-4000:]}")
    return binary


def build_ours():
    cmd = ["nice", "cargo", "build", "--release", "-p", "wasm-device-plugin"]
    say(f"building ours: {' '.join(cmd[1:])}")
    subprocess.run(cmd, cwd=REPO, check=True)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    return os.path.join(target, "release", "wasm-device-plugin")


# ----- the two plugins -----------------------------------------------------------------------
def ours_command(binary, run_dir, host, plugins_dir, port):
    config = os.path.join(run_dir, "config")
    os.makedirs(config)
    with open(os.path.join(config, "acc.toml"), "w") as f:
        f.write(f'version = 1\nresource = "{RESOURCE}"\n\n[[nodes]]\npath = "/dev/acc*"\n')
    return [binary, "run", "--config-dir", config, "--device-plugin-dir", plugins_dir,
            "--host-root", host, "--registration", "kubelet",
            "--metrics-addr", f"127.0.0.1:{port}"]


def peer_command(binary, run_dir, host, plugins_dir, port):
    domain, name = RESOURCE.split("/")
    device = {"name": name, "groups": [{"paths": [{"path": os.path.join(host, "dev", "acc*")}]}]}
    return [binary, "--device", json.dumps(device), "--domain", domain,
            "--plugin-directory", plugins_dir + "/", "--listen", f"127.0.0.1:{port}"]


# ----- readings from /proc -------------------------------------------------------------------
def memory_mib(pid):
    """(RSS, USS) in MiB from smaps_rollup: USS = private clean + private dirty."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    uss = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return fields["Rss"] / 1024, uss / 1024


def cpu_ns(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# ----- one run -------------------------------------------------------------------------------
def make_node(path, i, kind):
    if kind == "char":
        # 240-254 are reserved for local use: no driver on the machine answers them.
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(250, i))
    else:
        open(path, "w").close()


def make_nodes(host, n, kind):
    dev = os.path.join(host, "dev")
    os.makedirs(dev)
    for i in range(n):
        make_node(os.path.join(dev, f"acc{i}"), i, kind)


def run_once(standin, stubs, name, command, n, args, work, pauses):
    run_dir = tempfile.mkdtemp(prefix=f"{name}-{n}-", dir=work)
    host = os.path.join(run_dir, "host")
    plugins_dir = os.path.join(run_dir, "device-plugins")
    os.makedirs(plugins_dir)
    make_nodes(host, n, args.nodes)
    argv = command(run_dir, host, plugins_dir, free_port())
    env = {"PATH": "/usr/bin:/bin", "HOME": run_dir}
    kubelet = standin.Kubelet(plugins_dir, stubs)
    kubelet.start()
    result = {"plugin": name, "n": n}
    log_path = os.path.join(run_dir, "plugin.log")
    proc = None
    try:
        with open(log_path, "wb") as log:
            t_spawn = time.monotonic()
            proc = subprocess.Popen(argv, env=env, cwd=run_dir, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        plugin = kubelet.wait_registered(30)
        if plugin is None:
            raise RuntimeError("no Register within 30 s")
        if plugin.resource != RESOURCE:
            raise RuntimeError(f"registered {plugin.resource!r}, not {RESOURCE!r}")
        result["registered_ms"] = (plugin.registered_at - t_spawn) * 1000
        listed_at = plugin.wait_for(lambda healthy, listed: healthy == n, 30)
        if listed_at is None:
            raise RuntimeError(f"no ListAndWatch update with {n} healthy within 30 s "
                               f"(stream error: {plugin.error})")
        result["listed_ms"] = (listed_at - t_spawn) * 1000

        cpu_before, t_cpu = cpu_ns(proc.pid), time.monotonic()
        time.sleep(max(0.0, plugin.registered_at + args.settle_s - time.monotonic()))
        result["idle_cpu_ms"] = (cpu_ns(proc.pid) - cpu_before) / 1e6
        result["idle_window_s"] = time.monotonic() - t_cpu
        result["rss_mib"], result["uss_mib"] = memory_mib(proc.pid)

        ids = sorted(plugin.healthy_ids)
        samples = [kubelet.allocate(plugin, [ids[i % len(ids)]])
                   for i in range(WARMUP_CALLS + args.allocs)][WARMUP_CALLS:]
        result["allocate_p50_us"] = percentile(samples, 0.50) * 1e6
        result["allocate_p99_us"] = percentile(samples, 0.99) * 1e6
        result["rss_after_calls_mib"], _ = memory_mib(proc.pid)

        # Hot-plug: the last node goes, then comes back, each after a pause
        # that samples the phase of a 5 s poll (the same pauses for both).
        node = os.path.join(host, "dev", f"acc{n - 1}")
        for k in range(args.removals):
            time.sleep(pauses.uniform(0, 5))
            t_gone = time.monotonic()
            os.unlink(node)
            seen = plugin.wait_for(lambda healthy, listed: healthy == n - 1, 30, after=t_gone)
            if seen is None:
                raise RuntimeError("a removed node not seen in ListAndWatch within 30 s")
            result.setdefault("removed_ms", []).append((seen - t_gone) * 1000)
            time.sleep(pauses.uniform(0, 5))
            t_back = time.monotonic()
            make_node(node, n - 1, args.nodes)
            seen = plugin.wait_for(lambda healthy, listed: healthy == n, 30, after=t_back)
            if seen is None:
                raise RuntimeError("a re-created node not healthy again within 30 s")
            result.setdefault("recreated_ms", []).append((seen - t_back) * 1000)

        # A kubelet restart: the folder emptied, kubelet.sock served anew.
        for k in range(args.restarts):
            time.sleep(pauses.uniform(0, 1))
            t_stop = time.monotonic()
            t_restart = kubelet.restart()
            result.setdefault("standin_restart_ms", []).append((t_restart - t_stop) * 1000)
            plugin = kubelet.wait_registered(30, after=t_stop)
            if plugin is None:
                raise RuntimeError("no Register within 30 s of a kubelet restart")
            result.setdefault("reregistered_ms", []).append(
                max(0.0, plugin.registered_at - t_restart) * 1000)
            seen = plugin.wait_for(lambda healthy, listed: healthy == n, 30)
            if seen is None:
                raise RuntimeError("no full list within 30 s of registering again")
            result.setdefault("relisted_ms", []).append((seen - t_restart) * 1000)

        exited = {}

        def reap():
            _, status = os.waitpid(proc.pid, 0)
            exited["at"] = time.monotonic()
            exited["status"] = status

        waiter = threading.Thread(target=reap, daemon=True)
        waiter.start()
        t_term = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        waiter.join(10)
        if "at" not in exited:
            raise RuntimeError("still running 10 s after SIGTERM")
        proc.returncode = os.waitstatus_to_exitcode(exited["status"])
        result["exit_ms"] = (exited["at"] - t_term) * 1000
        result["exit_code"] = proc.returncode
        result["socket_removed"] = not os.path.exists(os.path.join(plugins_dir, plugin.endpoint))
    except Exception as e:  # the run is reported, the others go on
        result["error"] = str(e)
        with open(log_path, "rb") as f:
            result["log_tail"] = f.read()[-2000:].decode(errors="replace")
        say(f"{name} N={n}: {e}\n{result['log_tail']}")
    finally:
        if proc is not None and proc.returncode is None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        kubelet.stop()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    return result


# ----- the table -----------------------------------------------------------------------------
METRICS = [
    ("registered_ms", "start -> registered (ms)", "{:.1f}"),
    ("listed_ms", "start -> N healthy listed (ms)", "{:.1f}"),
    ("rss_mib", "RSS {settle} s after registration (MiB)", "{:.1f}"),
    ("uss_mib", "USS {settle} s after registration (MiB)", "{:.1f}"),
    ("idle_cpu_ms", "CPU from the full list to then (ms)", "{:.1f}"),
    ("allocate_p50_us", "Allocate 1 device p50 (µs)", "{:.0f}"),
    ("allocate_p99_us", "Allocate 1 device p99 (µs)", "{:.0f}"),
    ("rss_after_calls_mib", "RSS after the calls (MiB)", "{:.1f}"),
    ("removed_ms", "node removed -> seen in ListAndWatch (ms)", "{:.0f}"),
    ("recreated_ms", "node re-created -> healthy again (ms)", "{:.0f}"),
    ("reregistered_ms", "kubelet restart -> registered again (ms)", "{:.0f}"),
    ("relisted_ms", "kubelet restart -> N healthy listed again (ms)", "{:.0f}"),
    ("exit_ms", "SIGTERM -> exit (ms)", "{:.2f}"),
]


def summary(results, sizes, settle):
    rows = []
    for key, label, fmt in METRICS:
        for n in sizes:
            row = {"metric": key, "label": label.format(settle=f"{settle:g}"), "n": n}
            for name in ("ours", "peer"):
                values = []
                for r in results:
                    if r["plugin"] == name and r["n"] == n and key in r:
                        values += r[key] if isinstance(r[key], list) else [r[key]]
                if values:
                    row[name] = {"median": statistics.median(values),
                                 "min": min(values), "max": max(values), "count": len(values)}
            if "ours" in row and "peer" in row and row["peer"]["median"] > 0:
                row["ratio"] = row["ours"]["median"] / row["peer"]["median"]
            row["format"] = fmt
            rows.append(row)
    return rows


def markdown(rows):
    def cell(value, fmt):
        if value is None:
            return "—"
        return f"{fmt.format(value['median'])} ({fmt.format(value['min'])}–{fmt.format(value['max'])})"

    lines = ["| metric | N | ours median (min–max) | peer median (min–max) | ours/peer |",
             "|---|---|---|---|---|"]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "—"
        lines.append(f"| {row['label']} | {row['n']} | {cell(row.get('ours'), row['format'])} "
                     f"| {cell(row.get('peer'), row['format'])} | {ratio} |")
    return "\n".join(lines)


def machine():
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    return {"cpus": os.cpu_count(), "arch": platform.machine(),
            "kernel": platform.release(), "load_1min_at_start": float(load),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", help="our binary (default: cargo build --release here)")
    parser.add_argument("--peer", help="the peer's binary (default: go install into the cache)")
    parser.add_argument("--peer-version", default=PEER_VERSION,
                        help=f"module version to build (default {PEER_VERSION})")
    parser.add_argument("--sizes", default="8,128", help="device counts (default 8,128)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per plugin and size (3)")
    parser.add_argument("--allocs", type=int, default=200, help="Allocate calls per run (200)")
    parser.add_argument("--removals", type=int, default=1,
                        help="node removals and re-creations per run (1)")
    parser.add_argument("--restarts", type=int, default=1,
                        help="kubelet restarts per run (1)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pauses (1)")
    parser.add_argument("--settle-s", type=float, default=5.0,
                        help="seconds from registration to the memory reading (5)")
    parser.add_argument("--nodes", choices=("file", "char"), default="file",
                        help="device nodes: plain files (default) or character devices (root)")
    parser.add_argument("--json", help="write every sample, the machine and settings here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders and logs")
    parser.add_argument("--setup-only", action="store_true",
                        help="build or fetch what is missing, print the binaries, stop")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.nodes == "char" and os.geteuid() != 0:
        sys.exit("--nodes char needs root (mknod)")

    cache = cache_root()
    os.makedirs(cache, exist_ok=True)
    enter_venv(cache)
    sys.dont_write_bytecode = True  # no __pycache__ in the clone
    sys.path.insert(0, HERE)
    import standin
    stubs = standin.load_stubs(cache)

    peer = os.path.abspath(args.peer or build_peer(cache, args.peer_version))
    ours = os.path.abspath(args.ours or build_ours())
    binaries = {name: {"path": path, "bytes": os.path.getsize(path)}
                for name, path in (("ours", ours), ("peer", peer))}
    if not args.peer:
        binaries["peer"]["version"] = f"{PEER_MODULE}@{args.peer_version}"
    for name, info in binaries.items():
        say(f"{name}: {info['path']} ({info['bytes'] / 1e6:.1f} MB)")
    if args.setup_only:
        return

    commands = {"ours": lambda *a: ours_command(ours, *a),
                "peer": lambda *a: peer_command(peer, *a)}
    facts = machine()
    work = tempfile.mkdtemp(prefix="wdp-side-by-side-")
    results = []
    try:
        for rnd in range(args.rounds):
            for i, n in enumerate(sizes):
                order = ("ours", "peer") if (rnd + i) % 2 == 0 else ("peer", "ours")
                seed = args.seed * 1_000_003 + rnd * 1009 + n
                for name in order:
                    result = run_once(standin, stubs, name, commands[name], n, args, work,
                                      random.Random(seed))
                    result["round"] = rnd
                    results.append(result)
                    if "error" not in result:
                        say(f"round {rnd + 1}/{args.rounds} N={n} {name}: registered "
                            f"{result['registered_ms']:.1f} ms, listed {result['listed_ms']:.1f} "
                            f"ms, RSS {result['rss_mib']:.1f} MiB, Allocate p50 "
                            f"{result['allocate_p50_us']:.0f} µs, exit {result['exit_ms']:.2f} ms")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows = summary(results, sizes, args.settle_s)
    with open("/proc/loadavg") as f:
        facts["load_1min_at_end"] = float(f.read().split()[0])
    print(f"{facts['cpus']} CPUs, {facts['arch']}, Linux {facts['kernel']}, "
          f"1-minute load {facts['load_1min_at_start']:.2f} at the start and "
          f"{facts['load_1min_at_end']:.2f} at the end; {args.rounds} rounds, "
          f"{args.allocs} Allocate calls a run, {args.nodes} nodes; {facts['date']}")
    print(f"ours: {binaries['ours']['path']} ({binaries['ours']['bytes'] / 1e6:.1f} MB); "
          f"peer: {binaries['peer'].get('version', binaries['peer']['path'])} "
          f"({binaries['peer']['bytes'] / 1e6:.1f} MB)")
    print()
    print(markdown(rows))
    failures = [r for r in results if "error" in r]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts, "binaries": binaries, "settings": vars(args),
                       "summary": [{k: v for k, v in row.items() if k != "format"} for row in rows],
                       "runs": results}, f, indent=1)
    if failures:
        print(f"\n{len(failures)} run(s) failed: "
              + "; ".join(f"{r['plugin']} N={r['n']}: {r['error']}" for r in failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
