//! Compiling guests ahead of serving them: the `precompile` subcommand,
//! and `run`'s use of it in a child process, so that the serving process
//! maps compiled guests from the precompiled-guest directory and never
//! holds the compiler's code or working memory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

/// How long `run` waits for its precompile child before serving anyway
/// (the host then compiles what is missing itself).
const CHILD_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, clap::Args)]
pub(crate) struct PrecompileArgs {
    /// Directory holding host.toml (whose `precompiled-cache-dir` receives
    /// the compiled guests) and one *.toml per resource.
    #[arg(long, env = "WDP_CONFIG_DIR")]
    config_dir: PathBuf,
}

/// `precompile`: compiles every guest the config names into its
/// precompiled-guest directory and prints where each went.
pub(crate) fn run(args: PrecompileArgs) -> anyhow::Result<()> {
    let report = wdp_host::precompile(&args.config_dir)?;
    let Some(dir) = report.dir else {
        println!(
            "{}: host.toml sets no precompiled-cache-dir; nothing to do",
            args.config_dir.display()
        );
        return Ok(());
    };
    println!("precompiled guests in {}", dir.display());
    for (guest, file) in report.guests {
        println!("  {} -> {}", guest.display(), file.display());
    }
    Ok(())
}

/// Before `run` serves `config_dir`: when its `host.toml` names a
/// precompiled-guest directory, compiles the guests there in a child
/// process (this executable's `precompile`). Failures are only logged:
/// the host then compiles in-process, and reports bad guests itself.
pub(crate) async fn in_child(config_dir: &Path) {
    let dir = config_dir.to_owned();
    // Only host.toml: the resource files are read (and a bad one reported)
    // by the start that follows.
    let wanted = tokio::task::spawn_blocking(move || wdp_host::wants_precompiled_guests(&dir))
        .await
        .unwrap_or(false);
    if !wanted {
        return;
    }
    let result = async {
        let exe = std::env::current_exe().context("locating this executable")?;
        let mut child = tokio::process::Command::new(exe)
            .arg("precompile")
            .arg("--config-dir")
            .arg(config_dir)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting the precompile child")?;
        let status = tokio::time::timeout(CHILD_LIMIT, child.wait())
            .await
            .with_context(|| format!("still compiling after {CHILD_LIMIT:?}"))?
            .context("waiting for the precompile child")?;
        anyhow::ensure!(status.success(), "the precompile child failed ({status})");
        Ok(())
    }
    .await;
    if let Err(error) = result {
        tracing::warn!(error = %format!("{error:#}"), "guests not precompiled in a child process; compiling them in the serving process");
    }
}
