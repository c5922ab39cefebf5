//! Builds the guests workspace (`guests/`) for `wasm32-wasip2` with a
//! nested cargo and generates `pub const` paths to every built guest.
//! It writes only under `target/`: `bash guests/build.sh` is what puts the
//! example guests into `config/guests/` for the shipped configuration.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

/// A guest crate of the guests workspace.
struct GuestCrate {
    /// Package name (kebab-case).
    package: &'static str,
    /// Name of the generated constant.
    constant: &'static str,
    /// One of the example guests (listed in `EXAMPLES`; `guests/build.sh`
    /// copies these into `config/guests/`), not a test guest.
    example: bool,
    /// What it is, for the generated docs.
    doc: &'static str,
}

const GUESTS: &[GuestCrate] = &[
    GuestCrate {
        package: "pci-filter",
        constant: "PCI_FILTER",
        example: true,
        doc: "Example discovery guest: PCI vendor/class filter.",
    },
    GuestCrate {
        package: "presence-health",
        constant: "PRESENCE_HEALTH",
        example: true,
        doc: "Example health guest: unhealthy while hardware or its driver is gone.",
    },
    GuestCrate {
        package: "numa-packing",
        constant: "NUMA_PACKING",
        example: true,
        doc: "Example preferred-allocation guest: NUMA / link-locality packing.",
    },
    GuestCrate {
        package: "allocate-shaper",
        constant: "ALLOCATE_SHAPER",
        example: true,
        doc: "Example allocate guest: visible-devices env, device specs or CDI names.",
    },
    GuestCrate {
        package: "pre-start-check",
        constant: "PRE_START_CHECK",
        example: true,
        doc: "Example pre-start guest: refuses a start when hardware is gone.",
    },
    GuestCrate {
        package: "iommu-group",
        constant: "IOMMU_GROUP",
        example: true,
        doc: "Example discovery guest: one VFIO device per IOMMU group.",
    },
    GuestCrate {
        package: "gpu-partitions",
        constant: "GPU_PARTITIONS",
        example: true,
        doc: "Example DRA guest (dra-layout, dra-prepare, dra-unprepare): GPU partitions on per-GPU counters, created and removed through sysfs attributes.",
    },
    GuestCrate {
        package: "vfio-guard",
        constant: "VFIO_GUARD",
        example: true,
        doc: "Example DRA guest (device-taints-v2, passthrough): informational `none` taints for degraded devices (`notes = N` adds N more), and refusing to bind an IOMMU group holding the node's own disks.",
    },
    GuestCrate {
        package: "hostile-infinite-loop",
        constant: "HOSTILE_INFINITE_LOOP",
        example: false,
        doc: "Hostile guest (every hook): spins forever.",
    },
    GuestCrate {
        package: "hostile-memory-bomb",
        constant: "HOSTILE_MEMORY_BOMB",
        example: false,
        doc: "Hostile guest (every hook): allocates without end.",
    },
    GuestCrate {
        package: "hostile-trap",
        constant: "HOSTILE_TRAP",
        example: false,
        doc: "Hostile guest (every hook): panics.",
    },
    GuestCrate {
        package: "hostile-sleeper",
        constant: "HOSTILE_SLEEPER",
        example: false,
        doc: "Hostile guest (every hook): sleeps for an hour.",
    },
    GuestCrate {
        package: "hostile-nonsense",
        constant: "HOSTILE_NONSENSE",
        example: false,
        doc: "Hostile guest (every hook): answers that a validator must refuse.",
    },
    GuestCrate {
        package: "hostile-stderr-writer",
        constant: "HOSTILE_STDERR_WRITER",
        example: false,
        doc: "Hostile guest (every hook): writes to stderr, then answers politely.",
    },
    GuestCrate {
        package: "hostile-wrong-export",
        constant: "HOSTILE_WRONG_EXPORT",
        example: false,
        doc: "Refused at load: exports `wdp-test:extra/telemetry@0.1.0`, no hook.",
    },
    GuestCrate {
        package: "hostile-bad-import",
        constant: "HOSTILE_BAD_IMPORT",
        example: false,
        doc: "Refused at load: imports `hardware.reset-device`, which the host lacks.",
    },
    GuestCrate {
        package: "hostile-wrong-version",
        constant: "HOSTILE_WRONG_VERSION",
        example: false,
        doc: "Refused at load: a health guest built against the WIT package at 0.2.0.",
    },
    GuestCrate {
        package: "hostile-feedback-writer",
        constant: "HOSTILE_FEEDBACK_WRITER",
        example: false,
        doc: "Test health guest: writes a granted attribute of every candidate on every call.",
    },
    GuestCrate {
        package: "hostile-size-bomb",
        constant: "HOSTILE_SIZE_BOMB",
        example: false,
        doc: "Test guest (discovery, allocate): huge replica counts and a 5 MiB answer once given work.",
    },
    GuestCrate {
        package: "hostile-busy-health",
        constant: "HOSTILE_BUSY_HEALTH",
        example: false,
        doc: "Test health guest: spins to its deadline while a candidate's `busy` attribute reads 1.",
    },
    GuestCrate {
        package: "hostile-admin-grant",
        constant: "HOSTILE_ADMIN_GRANT",
        example: false,
        doc: "Test allocate guest: adds the device node (`extra-node`, default the MIG config capability node) and mount (`extra-mount`) its guest-config names to every answer.",
    },
    GuestCrate {
        package: "hostile-position-layout",
        constant: "HOSTILE_POSITION_LAYOUT",
        example: false,
        doc: "Test dra-layout guest: counter set `set-<i>` and partitions `part-<i>-0`, `part-<i>-1` for the device at position `i`, the list reversed with guest-config `reverse = \"true\"`.",
    },
    GuestCrate {
        package: "compat-newer-patch",
        constant: "COMPAT_NEWER_PATCH",
        example: false,
        doc: "Loads: a health and device-taints guest built against the WIT package at 0.1.4 (a newer patch than the host's); taints every device `example.com/note=<note>` NoExecute.",
    },
    GuestCrate {
        package: "compat-taints-0-1-2",
        constant: "COMPAT_TAINTS_0_1_2",
        example: false,
        doc: "Loads: a device-taints guest built against the WIT package at 0.1.2 (before device-taints-v2); taints every device `legacy=<note>` NoSchedule.",
    },
    GuestCrate {
        package: "compat-taints-both",
        constant: "COMPAT_TAINTS_BOTH",
        example: false,
        doc: "Test guest exporting device-taints (`asked=device-taints` NoSchedule) and device-taints-v2 (`asked=device-taints-v2`, effect none): only the latter is asked.",
    },
    GuestCrate {
        package: "compat-older-patch",
        constant: "COMPAT_OLDER_PATCH",
        example: false,
        doc: "Loads: a health guest built against the WIT package at 0.1.0 (before the `claim` import).",
    },
    GuestCrate {
        package: "compat-previous-patch",
        constant: "COMPAT_PREVIOUS_PATCH",
        example: false,
        doc: "Loads: an allocate guest built against the WIT package at 0.1.1 (the `claim` import without `devices`); echoes the claim into `WDP_CLAIM`.",
    },
    GuestCrate {
        package: "claim-echo",
        constant: "CLAIM_ECHO",
        example: false,
        doc: "Test allocate + pre-start guest: echoes the DRA claim and its opaque configs into env vars; pre-start refuses when a config says \"refuse-pre-start\".",
    },
];

/// Environment variables a cargo build script inherits that must not leak
/// into the nested build (they describe the outer build, not this one).
const LEAKY: &[&str] = &[
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_LINKER",
    "TARGET",
    "HOST",
    "OUT_DIR",
    "OPT_LEVEL",
    "PROFILE",
    "DEBUG",
    "NUM_JOBS",
    "MAKEFLAGS",
    "MFLAGS",
];

/// `CARGO_*` variables that are the user's own settings and may stay.
const KEPT_CARGO_PREFIXES: &[&str] = &[
    "CARGO_HOME",
    "CARGO_NET_",
    "CARGO_HTTP_",
    "CARGO_REGISTRIES_",
    "CARGO_REGISTRY_",
    "CARGO_TERM_",
];

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .ancestors()
        .nth(3)
        .expect("crates/testing/guest-artifacts lives three levels below the workspace root")
        .to_path_buf();
    let guests_dir = workspace.join("guests");
    let wit_dir = workspace.join("wit");
    let target_dir = workspace.join("target").join("guests");

    watch(&guests_dir);
    watch(&wit_dir);

    check_target_installed();

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(&guests_dir).args([
        "build",
        "--release",
        "--workspace",
        "--target",
        TARGET,
    ]);
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let leaky_cargo =
            key.starts_with("CARGO_") && !KEPT_CARGO_PREFIXES.iter().any(|p| key.starts_with(p));
        if leaky_cargo || LEAKY.contains(&key) || key.starts_with("CARGO_ENCODED_") {
            command.env_remove(key);
        }
    }
    // After the removals: the outer build's own CARGO_TARGET_DIR (when the
    // user set one) is among them, and must not undo this one.
    command.env("CARGO_TARGET_DIR", &target_dir);
    let status = command.status().unwrap_or_else(|e| {
        panic!(
            "cannot run cargo to build the guests in {}: {e}",
            guests_dir.display()
        )
    });
    if !status.success() {
        panic!(
            "building the guests failed (`cargo build --release --target {TARGET}` in {}); \
             see the output above. If the target is missing: rustup target add {TARGET}",
            guests_dir.display()
        );
    }

    let out_dir = target_dir.join(TARGET).join("release");
    let mut code = String::new();
    let mut all = String::new();
    let mut examples = String::new();
    let mut hostile = String::new();
    for guest in GUESTS {
        let file = out_dir.join(format!("{}.wasm", guest.package.replace('-', "_")));
        assert!(
            file.is_file(),
            "guest {} was not built: {} is missing",
            guest.package,
            file.display()
        );
        let path = file.to_str().expect("guest paths are UTF-8");
        writeln!(code, "/// {}", guest.doc).unwrap();
        writeln!(code, "pub const {}: &str = {path:?};", guest.constant).unwrap();
        writeln!(all, "    ({:?}, {}),", guest.package, guest.constant).unwrap();
        if guest.example {
            writeln!(examples, "    ({:?}, {}),", guest.package, guest.constant).unwrap();
        } else {
            writeln!(hostile, "    ({:?}, {}),", guest.package, guest.constant).unwrap();
        }
    }
    writeln!(
        code,
        "/// Every built guest as `(package name, path)`.\npub const ALL: &[(&str, &str)] = &[\n{all}];"
    )
    .unwrap();
    writeln!(
        code,
        "/// The example guests as `(package name, path)`.\npub const EXAMPLES: &[(&str, &str)] = &[\n{examples}];"
    )
    .unwrap();
    writeln!(
        code,
        "/// The test guests (hostile, refused, other versions) as `(package name, path)`.\npub const TEST_GUESTS: &[(&str, &str)] = &[\n{hostile}];"
    )
    .unwrap();
    let generated = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("guests.rs");
    write_if_changed(&generated, code.as_bytes());
}

/// Fails early, with the fix, when the standard library for the target is
/// not installed.
fn check_target_installed() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", rustc.to_string_lossy()));
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib").join("rustlib").join(TARGET);
    if !lib.is_dir() {
        panic!(
            "\n\nThe Rust target {TARGET} is not installed (no {}).\n\
             The policy guests are built for it. Install it with:\n\n    \
             rustup target add {TARGET}\n\n",
            lib.display()
        );
    }
}

/// Asks cargo to rerun this script when any file under `dir` changes
/// (skipping build output and hidden folders). A new guest crate shows up
/// through the edited `guests/Cargo.toml`, a new module through the file
/// that declares it.
fn watch(dir: &Path) {
    let mut seen = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            // The polyglot guests (and their node_modules) are built by
            // guests/polyglot/build.sh, not by cargo.
            if name == "target"
                || name == "node_modules"
                || name == "polyglot"
                || name.to_string_lossy().starts_with('.')
            {
                continue;
            }
            if path.is_dir() {
                // Not the folder itself: cargo would scan it whole,
                // build output included.
                stack.push(path);
            } else if seen.insert(path.clone()) {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
    }
}

fn write_if_changed(path: &Path, bytes: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
