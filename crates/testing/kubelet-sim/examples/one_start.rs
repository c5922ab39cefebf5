//! One plugin start seen through to its first admission, for profiling a
//! start (`tools/startup-order.sh`): serves `kubelet.sock` in the folder
//! given, waits until `RESOURCE` has registered and listed `COUNT`
//! healthy devices, admits one container asking for one device the
//! kubelet's way, then exits. The plugin is started by the caller,
//! after this program has printed `serving`; it is stopped by the caller
//! once this program has exited.
//!
//! usage: `one_start DEVICE_PLUGIN_DIR RESOURCE COUNT [TIMEOUT_S]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use wdp_kubelet_sim::{SimError, SimKubelet};

struct Args {
    dir: PathBuf,
    resource: String,
    count: usize,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let usage = "usage: one_start DEVICE_PLUGIN_DIR RESOURCE COUNT [TIMEOUT_S]";
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or(usage)?.into();
    let resource = args.next().ok_or(usage)?;
    let count = args
        .next()
        .ok_or(usage)?
        .parse()
        .map_err(|e| format!("COUNT: {e}"))?;
    let timeout = match args.next() {
        Some(s) => Duration::from_secs(s.parse().map_err(|e| format!("TIMEOUT_S: {e}"))?),
        None => Duration::from_secs(300),
    };
    Ok(Args {
        dir,
        resource,
        count,
        timeout,
    })
}

async fn one_start(args: &Args) -> Result<(), SimError> {
    let kubelet = SimKubelet::start(&args.dir).await?;
    println!("serving {}", args.dir.join("kubelet.sock").display());
    kubelet
        .wait_registered(&args.resource, 1, args.timeout)
        .await?;
    println!("registered {}", args.resource);
    kubelet
        .wait_devices(&args.resource, args.timeout, |devices| {
            devices.iter().filter(|d| d.health == "Healthy").count() == args.count
        })
        .await?;
    println!("listed {} healthy devices", args.count);
    let admission = kubelet.admit(&args.resource, 1).await?;
    println!("admitted {:?}", admission.devices);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match one_start(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("one_start: {e}");
            ExitCode::FAILURE
        }
    }
}
