//! `test`: runs every hook of a config directory's resources offline,
//! against a host root (a fixture tree, a recorded node, or `/`), and
//! prints what each hook answered with its time — the way to try a guest
//! before it reaches a node. The calls go through the same code the gRPC
//! service uses, guests, validation and failure policies included.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wdp_device_plugin::kubelet_status;

use wdp_resource::ResourceSpec;
use wdp_resource::{Resource, SharedDeviceSet};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The configuration directory whose resources and guests to exercise.
    #[arg(long, env = "WDP_CONFIG_DIR")]
    config_dir: PathBuf,

    /// Host root to read hardware from: a fixture tree, a recorded node
    /// snapshot, or / for this machine.
    #[arg(long, env = "WDP_HOST_ROOT", default_value = "/")]
    host_root: PathBuf,

    /// Only this resource (all by default).
    #[arg(long)]
    resource: Option<String>,

    /// How many devices the sample container asks for.
    #[arg(long, default_value_t = 2)]
    size: usize,

    /// Device IDs that must be part of the preferred allocation.
    #[arg(long = "must-include", value_delimiter = ',')]
    must_include: Vec<String>,

    #[command(flatten)]
    registration: crate::registration::RegistrationView,
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

pub async fn run(args: TestArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let (config_dir, host_root) = (args.config_dir.clone(), args.host_root.clone());
    let resources =
        crate::tasks::offline(move || Ok(wdp_host::load_offline(&config_dir, &host_root)?)).await?;
    println!(
        "loaded {} resource(s) from {} in {} (guests compiled, smoke-tested; discovery and health run once)",
        resources.len(),
        args.config_dir.display(),
        ms(started.elapsed())
    );
    let mut exercised = 0;
    for (resource, warnings) in resources {
        if args
            .resource
            .as_deref()
            .is_some_and(|r| r != resource.name())
        {
            continue;
        }
        exercised += 1;
        exercise_resource(&args, &resource, warnings).await?;
    }
    if let Some(name) = &args.resource
        && exercised == 0
    {
        anyhow::bail!("no resource named {name} in {}", args.config_dir.display());
    }
    Ok(())
}

/// Runs every hook of `resource` once and prints each answer: discovery
/// and health, the DRA layout if it has a driver, and a sample
/// admission of its healthy devices.
async fn exercise_resource(
    args: &TestArgs,
    resource: &Arc<Resource>,
    warnings: Vec<String>,
) -> anyhow::Result<()> {
    let spec = resource.spec();
    show_resource(&args.registration, resource, &spec, warnings);
    let set = show_discovery(resource).await?;
    if let Some(driver) = &spec.config.driver {
        show_dra_report(resource, driver);
    }
    let healthy: Vec<String> = set
        .devices()
        .iter()
        .filter(|d| d.healthy)
        .map(|d| d.id().to_owned())
        .collect();
    if healthy.is_empty() {
        println!("  no healthy device: nothing to allocate");
        return Ok(());
    }
    let size = args.size.clamp(1, healthy.len());
    let chosen = show_preferred(resource, &healthy, &args.must_include, size).await;
    show_allocate(resource, &chosen).await;
    if spec.config.pre_start_required {
        show_pre_start(resource, &chosen).await;
    }
    Ok(())
}

/// Prints what `resource` is: its file, how it registers, its guests and
/// the warnings its loading gave.
fn show_resource(
    registration: &crate::registration::RegistrationView,
    resource: &Resource,
    spec: &ResourceSpec,
    warnings: Vec<String>,
) {
    println!("\n{} ({})", resource.name(), spec.config.file.display());
    match &spec.config.driver {
        Some(driver) => {
            println!("  DRA driver {driver} (registers through the kubelet's plugin watcher)")
        }
        None => println!("  {}", registration.describe(&spec.config.socket)),
    }
    for (hook, guest) in &spec.guests {
        let signed = spec
            .signers
            .get(hook)
            .map(|(key, _)| format!(", signed by {key}"))
            .unwrap_or_default();
        println!(
            "  hook {hook}: guest {} sha256:{}{signed}",
            guest.name(),
            guest.content_hash()
        );
    }
    for warning in warnings {
        println!("  warning: {warning}");
    }
}

/// Runs discovery and health afresh, timed, and prints the devices found.
async fn show_discovery(resource: &Arc<Resource>) -> anyhow::Result<SharedDeviceSet> {
    let r = resource.clone();
    let took = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        r.refresh();
        started.elapsed()
    })
    .await?;
    let set = resource.devices();
    println!(
        "  discovery + health: {} devices in {}",
        set.len(),
        ms(took)
    );
    for d in set.devices() {
        let nodes: Vec<String> = d.device.nodes.iter().map(|n| n.path.clone()).collect();
        println!(
            "    {:<24} {:<9} numa={:?} nodes=[{}]{}",
            d.id(),
            if d.healthy { "Healthy" } else { "Unhealthy" },
            d.device.numa_nodes,
            nodes.join(","),
            if d.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.reason)
            }
        );
    }
    Ok(set)
}

/// Prints the slices `resource` would publish for DRA driver `driver`.
fn show_dra_report(resource: &Resource, driver: &str) {
    match wdp_host::dra_report(resource, driver) {
        Ok(report) => {
            println!("  DRA driver {driver}: as it will be published");
            for line in &report.layout {
                println!("    {line}");
            }
            for problem in &report.problems {
                println!("    DRA problem: {problem}");
            }
        }
        Err(error) => println!("  DRA driver {driver}: {error}"),
    }
}

/// Asks for a preferred allocation of `size` of the `healthy` devices and
/// prints it; returns it, or the first `size` healthy devices if it failed.
async fn show_preferred(
    resource: &Resource,
    healthy: &[String],
    must_include: &[String],
    size: usize,
) -> Vec<String> {
    let started = Instant::now();
    match resource
        .preferred(healthy, must_include, size as i32)
        .await
        .map_err(kubelet_status)
    {
        Ok(ids) => {
            println!(
                "  preferred-allocation (size {size}): {ids:?} in {}",
                ms(started.elapsed())
            );
            ids
        }
        Err(status) => {
            println!(
                "  preferred-allocation FAILED ({:?}): {}",
                status.code(),
                status.message()
            );
            healthy[..size].to_vec()
        }
    }
}

/// Allocates the `chosen` devices and prints the container edits.
async fn show_allocate(resource: &Resource, chosen: &[String]) {
    let started = Instant::now();
    match resource.allocate(chosen).await.map_err(kubelet_status) {
        Ok(response) => {
            println!("  allocate {chosen:?} in {}:", ms(started.elapsed()));
            for d in &response.devices {
                println!(
                    "    device {} -> {} ({})",
                    d.host_path, d.container_path, d.permissions
                );
            }
            let mut envs: Vec<_> = response.envs.iter().collect();
            envs.sort();
            for (k, v) in envs {
                println!("    env {k}={v}");
            }
            for m in &response.mounts {
                println!(
                    "    mount {} -> {}{}",
                    m.host_path,
                    m.container_path,
                    if m.read_only { " (ro)" } else { "" }
                );
            }
            let mut annotations: Vec<_> = response.annotations.iter().collect();
            annotations.sort();
            for (k, v) in annotations {
                println!("    annotation {k}={v}");
            }
            for c in &response.cdi_devices {
                println!("    cdi {c}");
            }
        }
        Err(status) => println!(
            "  allocate FAILED ({:?}): {}",
            status.code(),
            status.message()
        ),
    }
}

/// Runs the pre-start hook on the `chosen` devices and prints its answer.
async fn show_pre_start(resource: &Resource, chosen: &[String]) {
    let started = Instant::now();
    match resource.pre_start(chosen).await.map_err(kubelet_status) {
        Ok(()) => println!("  pre-start: ok in {}", ms(started.elapsed())),
        Err(status) => println!(
            "  pre-start FAILED ({:?}): {}",
            status.code(),
            status.message()
        ),
    }
}
