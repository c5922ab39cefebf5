//! `demo`: the real host, unchanged, against an in-process simulated
//! kubelet on a temporary device-plugin folder. It prints each
//! registration and device list, admits one sample container per resource
//! through every RPC the resource offers, shows the DRA resource of
//! `config/dra-demo` published and a sample claim prepared
//! ([`crate::demo_dra`]), and then keeps printing device list changes until
//! interrupted.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use wdp_host::{Host, HostOptions, Metrics};
use wdp_kubelet_sim::{Admission, PluginRecord, SimKubelet};

use crate::demo_dra::{DEMO_NODE, DraWorld};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The configuration directory to run (the shipped example by default).
    #[arg(long, env = "WDP_CONFIG_DIR", default_value = "config")]
    config_dir: PathBuf,

    /// Prefix for every hardware read (/sys, /dev).
    #[arg(long, env = "WDP_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,

    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, env = "WDP_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,

    /// A DRA resource file run beside the configuration (the configuration
    /// directory is copied into a temporary one with this file added).
    /// Default: `<config-dir>/dra-demo/loop-dra.toml` when it exists.
    #[arg(long)]
    dra_resource: Option<PathBuf>,

    /// Run the configuration directory as it is, without a DRA resource.
    #[arg(long)]
    no_dra: bool,

    /// Exit after the sample admissions instead of running until interrupted.
    #[arg(long)]
    once: bool,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let folder = tempfile::Builder::new()
        .prefix("wdp-demo-")
        .tempdir()
        .context("creating a temporary device-plugin folder")?;
    let kubelet = SimKubelet::start(folder.path()).await?;
    println!(
        "simulated kubelet serving {}",
        folder.path().join("kubelet.sock").display()
    );
    let registry_dir = folder.path().join("plugins_registry");
    std::fs::create_dir_all(&registry_dir).context("creating the plugins registry folder")?;
    let (config_dir, dra) = match dra_resource_file(&args) {
        None => (args.config_dir.clone(), None),
        Some(dra_resource) => {
            let config_dir = folder.path().join("config");
            seed_config(&args.config_dir, &dra_resource, &config_dir)?;
            let dra = DraWorld::start(folder.path(), &registry_dir).await?;
            (config_dir, Some(dra))
        }
    };
    let host = start_host(
        &args,
        folder.path(),
        &registry_dir,
        &config_dir,
        dra.as_ref(),
    )
    .await?;
    if let Some(addr) = args.metrics_addr {
        crate::http::serve(addr, host.clone()).await?;
    }

    show_device_plugins(&host, &kubelet).await?;
    if let Some(dra) = &dra {
        dra.show(&host).await?;
    }

    let violations = kubelet.state().violations;
    if !violations.is_empty() {
        anyhow::bail!("the plugin broke the protocol: {violations:?}");
    }
    if args.once {
        host.shutdown().await;
        return Ok(());
    }
    println!(
        "\nrunning; edit {} to reload live, Ctrl-C to stop",
        config_dir.display()
    );
    tokio::select! {
        result = crate::tasks::wait_for_signal() => result?,
        _ = print_device_list_changes(&kubelet) => {}
    }
    host.shutdown().await;
    Ok(())
}

/// The DRA resource file the demo runs beside the configuration: the one
/// given, else the shipped example when it exists; none with `--no-dra`.
fn dra_resource_file(args: &DemoArgs) -> Option<PathBuf> {
    match &args.dra_resource {
        _ if args.no_dra => None,
        Some(file) => Some(file.clone()),
        None => Some(args.config_dir.join("dra-demo/loop-dra.toml")).filter(|f| f.is_file()),
    }
}

/// Starts the real host on `config_dir` with every folder inside the
/// demo's temporary `folder` (DRA drivers register in `registry_dir`),
/// reaching the API server of `dra` if any; a failure names the guests
/// missing, if that is why.
async fn start_host(
    args: &DemoArgs,
    folder: &Path,
    registry_dir: &Path,
    config_dir: &Path,
    dra: Option<&DraWorld>,
) -> anyhow::Result<Arc<Host>> {
    Host::start(
        HostOptions {
            config_dir: config_dir.to_owned(),
            device_plugin_dir: folder.to_owned(),
            host_root: args.host_root.clone(),
            cdi_dir: folder.join("cdi"),
            registration: wdp_host::RegistrationMode::Kubelet,
            plugins_registry_dir: registry_dir.to_owned(),
            plugins_dir: folder.join("plugins"),
            state_dir: folder.join("state"),
            kubeconfig: dra.map(|d| d.kubeconfig().to_owned()),
            node_name: DEMO_NODE.to_owned(),
            instance_id: None,
            pod_resources_socket: folder.join("pod-resources/kubelet.sock"),
            serve_last_good: true,
        },
        Metrics::new(),
    )
    .await
    .map_err(|error| {
        let error = anyhow::Error::new(error).context(format!(
            "starting the host on {}",
            args.config_dir.display()
        ));
        match missing_guests_hint(&args.config_dir) {
            Some(hint) => anyhow::anyhow!("{error:#}\n\n{hint}"),
            None => error,
        }
    })
}

/// Shows every device-plugin (not DRA) resource of `host`: its
/// registration, its devices and a sample admission.
async fn show_device_plugins(host: &Host, kubelet: &SimKubelet) -> anyhow::Result<()> {
    let dra_resources = host.dra_status().await;
    let resources: Vec<String> = host
        .status()
        .await
        .into_keys()
        .filter(|name| !dra_resources.contains_key(name))
        .collect();
    for name in &resources {
        let record = kubelet
            .wait_registered(name, 1, Duration::from_secs(10))
            .await?;
        show_registration(name, &record);
        let healthy = record.healthy_ids().len();
        if healthy == 0 {
            println!("  (no healthy device: no sample admission)");
            continue;
        }
        let want = healthy.min(2);
        match kubelet.admit(name, want).await {
            Ok(admission) => show_admission(want, &admission),
            Err(error) => println!("  sample admission failed: {error}"),
        }
    }
    Ok(())
}

/// Prints how resource `name` registered and the devices it listed.
fn show_registration(name: &str, record: &PluginRecord) {
    let options = record.registration.options.unwrap_or_default();
    println!(
        "\nregistered {name} on {} (preferred allocation: {}, pre-start: {})",
        record.registration.endpoint,
        options.get_preferred_allocation_available,
        options.pre_start_required
    );
    for d in &record.devices {
        let numa = d
            .topology
            .as_ref()
            .map(|t| {
                format!(
                    " numa={:?}",
                    t.nodes.iter().map(|n| n.id).collect::<Vec<_>>()
                )
            })
            .unwrap_or_default();
        println!("  {} {}{numa}", d.id, d.health);
    }
}

/// Prints every RPC answer of a sample admission of `want` devices.
fn show_admission(want: usize, admission: &Admission) {
    println!("  sample admission of {want} device(s):");
    if let Some(preferred) = &admission.preferred {
        println!("    GetPreferredAllocation -> {preferred:?}");
    }
    let r = &admission.response;
    println!("    Allocate({:?}) ->", admission.devices);
    for spec in &r.devices {
        println!(
            "      device {} -> {} ({})",
            spec.host_path, spec.container_path, spec.permissions
        );
    }
    let mut envs: Vec<_> = r.envs.iter().collect();
    envs.sort();
    for (k, v) in envs {
        println!("      env {k}={v}");
    }
    for m in &r.mounts {
        println!("      mount {} -> {}", m.host_path, m.container_path);
    }
    for c in &r.cdi_devices {
        println!("      cdi {}", c.name);
    }
    let mut annotations: Vec<_> = r.annotations.iter().collect();
    annotations.sort();
    for (k, v) in annotations {
        println!("      annotation {k}={v}");
    }
    if admission.pre_started {
        println!("    PreStartContainer -> ok");
    }
    let timings: Vec<String> = admission
        .timings
        .iter()
        .map(|(rpc, t)| format!("{rpc} {:.0} µs", t.as_secs_f64() * 1e6))
        .collect();
    println!("    round trips: {}", timings.join(", "));
}

/// Prints each resource's device and health counts whenever a device
/// list the kubelet holds changes; never returns.
async fn print_device_list_changes(kubelet: &SimKubelet) {
    let mut state = kubelet.wait_for("", Duration::ZERO, |_| true).await.ok();
    loop {
        let before = state.clone();
        let Ok(now) = kubelet
            .wait_for("a change", Duration::from_secs(3600), |s| {
                before.as_ref().is_none_or(|b| {
                    s.plugins
                        .iter()
                        .map(|(k, p)| (k, &p.devices))
                        .ne(b.plugins.iter().map(|(k, p)| (k, &p.devices)))
                })
            })
            .await
        else {
            continue;
        };
        for (name, p) in &now.plugins {
            let healthy = p.healthy_ids().len();
            println!("{name}: {} devices, {healthy} healthy", p.devices.len());
        }
        state = Some(now);
    }
}

/// When guests the configuration refers to do not exist (the usual reason
/// the demo cannot start on a fresh checkout), names them and says how the
/// example guests are built. `None` when every guest is there.
fn missing_guests_hint(config_dir: &Path) -> Option<String> {
    let mut missing: Vec<String> = wdp_host::missing_guests(config_dir)
        .iter()
        .map(|guest| format!("  {}", guest.display()))
        .collect();
    if missing.is_empty() {
        return None;
    }
    missing.sort();
    missing.dedup();
    Some(format!(
        "These guests are missing:\n{}\n\
         The example guests are built into config/guests/ by `bash guests/build.sh` \
         (after `rustup target add wasm32-wasip2`); run it, then the demo again.",
        missing.join("\n")
    ))
}

/// Lays out the demo's configuration in `target`: the resource and host
/// files of `config_dir`, its `guests/` folder (linked, not copied), and
/// the DRA resource file `dra_resource`.
fn seed_config(config_dir: &Path, dra_resource: &Path, target: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(target).context("creating the demo's config folder")?;
    let entries = std::fs::read_dir(config_dir)
        .with_context(|| format!("reading {}", config_dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", config_dir.display()))?;
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(".toml") {
            std::fs::copy(entry.path(), target.join(&name))
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    let guests =
        std::path::absolute(config_dir.join("guests")).context("resolving the guests folder")?;
    std::os::unix::fs::symlink(&guests, target.join("guests"))
        .context("linking the guests folder")?;
    let name = dra_resource
        .file_name()
        .with_context(|| format!("{} names no file", dra_resource.display()))?;
    std::fs::copy(dra_resource, target.join(name))
        .with_context(|| format!("copying the DRA resource {}", dra_resource.display()))?;
    println!(
        "configuration: {} with {} added, in {}",
        config_dir.display(),
        dra_resource.display(),
        target.display()
    );
    Ok(())
}
