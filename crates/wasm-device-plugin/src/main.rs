//! `wasm-device-plugin`: the command line around the host. `run` serves
//! the kubelet, `check` validates a config directory offline, `demo` runs
//! the host against an in-process simulated kubelet. This binary owns
//! logging, the metrics/health HTTP endpoint and signal handling; the
//! supervisor lives in `wdp-host`, and what it serves in the crates below
//! it (`docs/architecture.md` draws them).

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

#[cfg(feature = "demo")]
mod demo;
#[cfg(feature = "demo")]
mod demo_dra;
mod exercise;
mod http;
mod new_guest;
mod package;
mod precompile;
mod registration;
mod tasks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};

use registration::Registration;
use tasks::{StopSignals, offline};

/// Only with the opt-in `mimalloc` feature on a musl target. The image's
/// static binary keeps musl's own allocator: mimalloc held 4-8x the heap
/// at idle and in a reload storm without options only an environment can
/// give it, and about 20 MiB after a storm with them (issue 52; figures
/// in docs/performance.md, "Memory of the image's binary"). glibc builds
/// keep glibc's allocator.
#[cfg(all(target_env = "musl", feature = "mimalloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "wasm-device-plugin",
    version,
    about = "Kubernetes device plugin host whose per-device policy runs as WebAssembly components"
)]
struct Cli {
    /// Log format: human-readable text or one JSON object per line. The
    /// filter comes from RUST_LOG (default: info).
    #[arg(
        long,
        value_enum,
        env = "WDP_LOG_FORMAT",
        default_value = "text",
        global = true
    )]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve every resource of the config directory to the kubelet until
    /// SIGTERM or SIGINT; reload live when the directory changes.
    Run(RunArgs),
    /// Validate the config directory and every guest, run discovery, and
    /// print what each resource would advertise. Exits non-zero on error.
    Check(CheckArgs),
    /// Exercise every hook of a config directory's resources offline
    /// against a host root (fixture tree, recorded node or /), printing
    /// what each hook answered and how long it took.
    Test(exercise::TestArgs),
    /// Record the hardware a config directory's resources select (sysfs,
    /// device nodes, NUMA topology) into a snapshot tree, usable later as
    /// --host-root for `test`, `check`, `demo` or a bug report.
    Record(RecordArgs),
    /// Compile every guest of a config directory into the directory its
    /// host.toml names as precompiled-cache-dir, so that `run` maps them
    /// instead of compiling (`run` does this itself in a child process).
    Precompile(precompile::PrecompileArgs),
    /// Write a folder of guests (and optionally a config folder) as a
    /// reproducible OCI image archive to push to a registry and mount as
    /// an image volume; prints the digest to pin.
    Package(package::PackageArgs),
    /// Copy the guests of a mounted guest image into a folder the host
    /// reads (the entrypoint of an image packaged with --installer, run as
    /// an init container where image volumes are not available).
    InstallGuests(package::InstallGuestsArgs),
    /// Write a new guest project (Rust, Python, JavaScript or C) with one
    /// working example per chosen hook, a config naming the built guest and
    /// a fixture host root, ready for `test` once built (see its README).
    NewGuest(new_guest::NewGuestArgs),
    /// Run the host on a config directory against an in-process simulated
    /// kubelet, print what registered and advertised, admit a sample
    /// container per resource, and keep running until interrupted. (Built
    /// with the `demo` feature, on by default; the image leaves it off.)
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
}

/// `run --invalid-config-at-start`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum InvalidConfigAtStart {
    /// Serve the last good configuration.
    LastGood,
    /// Exit.
    Refuse,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Directory holding host.toml and one *.toml per resource; guests are
    /// referenced relative to it. Watched for live reload.
    #[arg(long, env = "WDP_CONFIG_DIR")]
    config_dir: PathBuf,

    /// The kubelet's device-plugin directory, where kubelet.sock lives and
    /// where this host creates one socket per resource.
    #[arg(
        long,
        env = "WDP_DEVICE_PLUGIN_DIR",
        default_value = "/var/lib/kubelet/device-plugins"
    )]
    device_plugin_dir: PathBuf,

    /// Prefix for every hardware read (/sys, /dev), e.g. /host when the
    /// node's root is mounted there. Paths given to the kubelet stay host paths.
    #[arg(long, env = "WDP_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,

    /// Where CDI specs are written for resources with `cdi` on (a host
    /// path the container runtime reads, mounted at the same path).
    #[arg(long, env = "WDP_CDI_DIR", default_value = "/var/run/cdi")]
    cdi_dir: PathBuf,

    /// Address for /metrics, /healthz and /readyz, e.g. 0.0.0.0:9847.
    /// Off when not given.
    #[arg(long, env = "WDP_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,

    /// How resources register: `kubelet` calls Register on kubelet.sock;
    /// `plugin-watcher` serves a registration socket per resource in
    /// --plugins-registry-dir; `auto` takes the plugin watcher when that
    /// directory exists.
    #[arg(long, value_enum, env = "WDP_REGISTRATION", default_value = "auto")]
    registration: Registration,

    /// The kubelet's plugin-watcher directory, where registration sockets go.
    #[arg(
        long,
        env = "WDP_PLUGINS_REGISTRY_DIR",
        default_value = wdp_host::DEFAULT_PLUGINS_REGISTRY_DIR
    )]
    plugins_registry_dir: PathBuf,

    /// The kubelet's plugins folder: a DRA resource's driver serves
    /// `<plugins-dir>/<driver>/dra.sock`.
    #[arg(
        long,
        env = "WDP_PLUGINS_DIR",
        default_value = wdp_host::DEFAULT_PLUGINS_DIR
    )]
    plugins_dir: PathBuf,

    /// The host's state folder (DRA checkpoints of prepared claims, under
    /// `dra/`); must survive host restarts.
    #[arg(
        long,
        env = "WDP_STATE_DIR",
        default_value = wdp_host::DEFAULT_STATE_DIR
    )]
    state_dir: PathBuf,

    /// The kubelet's PodResources socket, read while a resource moves from
    /// the device-plugin API to DRA (which devices running containers
    /// hold); mount its folder read-only.
    #[arg(
        long,
        env = "WDP_POD_RESOURCES_SOCKET",
        default_value = wdp_host::DEFAULT_POD_RESOURCES_SOCKET
    )]
    pod_resources_socket: PathBuf,

    /// What a start does when the configuration is refused: `last-good`
    /// serves the last configuration that served (kept under
    /// `<state-dir>/last-good/`, its guests checked against the keys
    /// trusted now), with an ERROR, `config_valid` 0 and an Event on the
    /// node; `refuse` exits, as a first start with no snapshot always does.
    #[arg(
        long,
        value_enum,
        env = "WDP_INVALID_CONFIG_AT_START",
        default_value = "last-good"
    )]
    invalid_config_at_start: InvalidConfigAtStart,

    /// The kubeconfig the host reaches the API server with: DRA drivers
    /// publish ResourceSlices and read claims through it, and with
    /// configuration sets (a `sets/` folder in the config directory) the
    /// node's label that picks the set is read, and its opt-in state label
    /// written, through it. The in-cluster configuration when absent.
    /// Unused with neither DRA resources nor configuration sets.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,

    /// This node's name (the downward API's spec.nodeName): DRA resources
    /// publish their ResourceSlices for it, and with configuration sets its
    /// Node's label picks the set. Required with a DRA resource; with
    /// configuration sets and no node name, the set served at start (the
    /// one recorded, else the default) is never switched.
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,

    /// This instance's ID, the pod's UID (the downward API's
    /// metadata.uid): DRA drivers then serve `dra-<id>.sock` and
    /// `<driver>-<id>-reg.sock`, so a rolling update can run the new pod
    /// beside the old one (kubelet 1.33 or later). Letters, digits and `-`.
    #[arg(long, env = "POD_UID", value_parser = parse_instance_id)]
    instance_id: Option<String>,
}

/// An instance ID goes into socket and file names.
fn parse_instance_id(id: &str) -> Result<String, String> {
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(format!(
            "{id:?} is not an instance ID: 1-64 letters, digits and '-' (a pod UID)"
        ));
    }
    Ok(id.to_owned())
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Directory holding host.toml and one *.toml per resource.
    #[arg(long, env = "WDP_CONFIG_DIR")]
    config_dir: PathBuf,

    /// Prefix for every hardware read (/sys, /dev).
    #[arg(long, env = "WDP_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,

    #[command(flatten)]
    registration: registration::RegistrationView,

    /// The CDI folder `run` will write to: checked (created if missing,
    /// must accept new files) when a resource has `cdi` on.
    #[arg(long, env = "WDP_CDI_DIR")]
    cdi_dir: Option<PathBuf>,

    /// Show only what a node whose configuration-set label has this value
    /// runs (`""`: a node without the label). Without it, the default set
    /// and every named set are checked.
    #[arg(long, value_name = "VALUE")]
    node_label: Option<String>,
}

#[derive(Debug, clap::Args)]
struct RecordArgs {
    /// The configuration directory whose selectors say what to record.
    #[arg(long, env = "WDP_CONFIG_DIR")]
    config_dir: PathBuf,

    /// Where hardware is read (the node's root by default).
    #[arg(long, env = "WDP_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,

    /// The snapshot folder to write (created if missing).
    #[arg(long)]
    output: PathBuf,
}

fn init_tracing(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colour only for a person at a terminal, never in a collected log.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo prints its own story; its logs only speak up for problems.
    // notify reports an expected race (a watch the kernel already
    // dropped) at info; it is noise to an operator.
    let default_filter = match cli.command {
        #[cfg(feature = "demo")]
        Command::Demo(_) => "warn",
        Command::Test(_) => "warn",
        _ => "info,notify=warn",
    };
    init_tracing(cli.log_format, default_filter);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Check(args) => offline(move || check(args)).await,
            Command::Precompile(args) => offline(move || precompile::run(args)).await,
            #[cfg(feature = "demo")]
            Command::Demo(args) => demo::run(args).await,
            Command::Test(args) => exercise::run(args).await,
            Command::Record(args) => offline(move || record(args)).await,
            Command::Package(args) => offline(move || package::run(args)).await,
            Command::InstallGuests(args) => offline(move || package::install(args)).await,
            Command::NewGuest(args) => offline(move || new_guest::run(args)).await,
        }
    });
    let code = match result {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("error: {error:#}");
            1
        }
    };
    // Everything that must precede the exit is done (`run` removed its
    // sockets in `Host::shutdown`): end the process now instead of
    // tearing down the runtime's threads, the Wasm engine's reservations
    // and the rest one by one (milliseconds the kernel's exit does in
    // one go). A guest call still running on a blocking thread (a slow
    // hook near its deadline) does not hold up the exit either.
    // Nothing runs destructors after this: what a command printed without
    // a final newline is written out first.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(code)
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let stop = StopSignals::install()?;
    precompile::in_child(&args.config_dir).await;
    let metrics = Metrics::new();
    let options = HostOptions {
        config_dir: args.config_dir,
        device_plugin_dir: args.device_plugin_dir,
        host_root: args.host_root,
        cdi_dir: args.cdi_dir,
        registration: args.registration.into(),
        plugins_registry_dir: args.plugins_registry_dir,
        plugins_dir: args.plugins_dir,
        state_dir: args.state_dir,
        kubeconfig: args.kubeconfig,
        node_name: args.node_name.unwrap_or_default(),
        instance_id: args.instance_id,
        pod_resources_socket: args.pod_resources_socket,
        serve_last_good: matches!(args.invalid_config_at_start, InvalidConfigAtStart::LastGood),
    };
    let host = Host::start(options, metrics)
        .await
        .context("refusing to start")?;
    if let Some(addr) = args.metrics_addr {
        http::serve(addr, host.clone()).await?;
    }
    tokio::spawn(host.clone().release_start_up_code());
    tracing::info!("running; SIGTERM or SIGINT stops");
    stop.wait().await;
    tracing::info!("stopping");
    host.stop_before_exit().await;
    Ok(())
}

fn check(args: CheckArgs) -> anyhow::Result<()> {
    let reports = match &args.node_label {
        None => wdp_host::check(&args.config_dir, &args.host_root)?,
        Some(value) => {
            let label = wdp_host::config_set_label(&args.config_dir)?;
            let set = wdp_host::set_for_label(&args.config_dir, &label, Some(value))
                .map_err(anyhow::Error::msg)?;
            println!(
                "a node labelled {label}={value} runs configuration set {}",
                wdp_host::config_sets::shown(set.as_deref())
            );
            wdp_host::check_set(&args.config_dir, &args.host_root, set.as_deref())?
        }
    };
    if let Some(dir) = &args.cdi_dir {
        wdp_host::check_cdi_dir_for(dir, &reports).with_context(|| {
            format!("--cdi-dir {}: cannot write CDI specs there", dir.display())
        })?;
    }
    if reports.is_empty() {
        println!("{}: no resources configured", args.config_dir.display());
    }
    let named_sets = reports.iter().any(|r| r.set.is_some());
    let mut heading: Option<Option<String>> = None;
    for r in reports {
        if named_sets && heading.as_ref() != Some(&r.set) {
            println!(
                "configuration set {}:",
                wdp_host::config_sets::shown(r.set.as_deref())
            );
            heading = Some(r.set.clone());
        }
        print_report(&r, &args.registration);
    }
    Ok(())
}

/// What `check` prints of one resource: how it is served, its hooks and
/// guests, CDI, companions, devices and warnings.
fn print_report(r: &wdp_host::ResourceReport, registration: &registration::RegistrationView) {
    println!("{} ({})", r.resource, r.file.display());
    if let Some(dra) = &r.dra {
        println!(
            "  DRA driver {} (registration {}-reg.sock, endpoint <plugins-dir>/{}/dra.sock; CDI spec per claim)",
            dra.driver, dra.driver, dra.driver
        );
        let standard: std::collections::HashMap<&str, String> = dra
            .standard_attributes
            .iter()
            .map(|(id, attributes)| (id.as_str(), format!(" ({})", attributes.join(", "))))
            .collect();
        for (id, name) in &dra.names {
            let standard = standard.get(id.as_str()).map_or("", String::as_str);
            println!("    device {id} -> DRA name {name}{standard}");
        }
        for line in &dra.layout {
            println!("    {line}");
        }
        for problem in &dra.problems {
            println!("    DRA problem: {problem}");
        }
    } else {
        println!(
            "  socket {}  pre-start-required={}  get-preferred-allocation={}",
            r.socket, r.pre_start_required, r.get_preferred_allocation
        );
        println!("  {}", registration.describe(&r.socket));
    }
    for h in &r.hooks {
        let pinned = if h.pinned { " (pinned)" } else { "" };
        let signed = h
            .signed_by
            .as_ref()
            .map(|key| format!(", signed by {key}"))
            .unwrap_or_default();
        println!(
            "  hook {}: {} sha256:{}{pinned}{signed}",
            h.hook, h.guest, h.sha256
        );
    }
    if r.cdi != wdp_host::CdiMode::Off {
        let mode = if r.cdi == wdp_host::CdiMode::Names {
            "names only"
        } else {
            "names and device specs"
        };
        println!(
            "  cdi: devices named {}=<device ID> in Allocate ({mode})",
            r.resource
        );
    }
    for node in r.devices.companions() {
        println!("  companion {} (every container)", node.path);
    }
    println!(
        "  {} devices ({} healthy)",
        r.devices.len(),
        r.devices.healthy_count()
    );
    for d in r.devices.devices() {
        let nodes: Vec<String> = d.device.nodes.iter().map(|n| n.path.clone()).collect();
        let numa = if d.device.numa_nodes.is_empty() {
            String::new()
        } else {
            format!(" numa={:?}", d.device.numa_nodes)
        };
        println!(
            "    {} {}{numa} {}{}",
            d.id(),
            if d.healthy { "Healthy" } else { "Unhealthy" },
            nodes.join(","),
            if d.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.reason)
            }
        );
    }
    for w in &r.warnings {
        println!("  warning: {w}");
    }
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    for recorded in wdp_host::record(&args.config_dir, &args.host_root, &args.output)? {
        let summary = recorded.summary;
        println!(
            "{}: {} candidates recorded ({} files, {} links, {} device nodes)",
            recorded.name, recorded.candidates, summary.files, summary.links, summary.nodes
        );
    }
    println!("snapshot written to {}", args.output.display());
    Ok(())
}
