//! `package`: a folder of guests (and optionally a configuration folder)
//! written as a reproducible OCI image archive, each guest first loaded
//! the way the host loads it, so that an image holding a file the host
//! would refuse is never written; and `install-guests`, the entrypoint of
//! such an image built with an installer, which copies its guests out.

use std::path::{Path, PathBuf};

use anyhow::Context;
use wdp_guest_package::{PackageOptions, package};
use wdp_policy::signature::{GuestSigningKey, signature_path};
use wdp_policy::{EngineSettings, PolicyEngine};

#[derive(Debug, clap::Args)]
pub struct PackageArgs {
    /// Folder of built guests (`.wasm` components); it becomes `guests/`
    /// in the image, subfolders included.
    #[arg(long)]
    guests: PathBuf,

    /// A configuration folder to ship as `config/` beside the guests.
    #[arg(long)]
    config: Option<PathBuf>,

    /// A static (musl) build of this binary to ship as the image's
    /// entrypoint, `install-guests`: for clusters without image volumes,
    /// an init container running the image copies the guests out.
    #[arg(long)]
    installer: Option<PathBuf>,

    /// The OCI archive to write.
    #[arg(long, default_value = "guests.oci.tar")]
    output: PathBuf,

    /// The name the archive's index gives the image
    /// (`org.opencontainers.image.ref.name`).
    #[arg(long, default_value = "latest")]
    tag: String,

    /// The architecture the image config names: container runtimes match
    /// it to the node's before mounting the image.
    #[arg(long, default_value = default_architecture())]
    architecture: String,

    /// Timestamp of every file and of the image, in seconds since the Unix
    /// epoch.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    epoch: u64,

    /// Sign every guest with this unencrypted PEM ECDSA P-256 private key
    /// (PKCS#8 or SEC1, as openssl writes them): `<guest>.wasm.sig` (base64
    /// DER, the form `cosign sign-blob` writes) is written beside each
    /// guest in `--guests` before packaging, so the image carries it too.
    #[arg(long)]
    sign_key: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct InstallGuestsArgs {
    /// The guests folder of the mounted image.
    #[arg(long, default_value = "/guests")]
    from: PathBuf,

    /// Where the host will read them (an `emptyDir` shared with it).
    #[arg(long)]
    to: PathBuf,
}

/// `install-guests`: copies a packaged guests folder where the host reads
/// it, printing each file with its digest.
pub fn install(args: InstallGuestsArgs) -> anyhow::Result<()> {
    let files = wdp_guest_package::install_guests(&args.from, &args.to)?;
    for file in &files {
        println!("installed {} {}", file.path, file.digest);
    }
    println!("{} file(s) in {}", files.len(), args.to.display());
    Ok(())
}

/// The OCI name of this build's architecture.
fn default_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Packages, after loading every guest with the host's rules; prints the
/// digest to pin and each guest's own digest. With `--sign-key`, the key
/// is read and every guest loaded before any signature is written, and the
/// signatures written are taken back when packaging fails: nothing is
/// vouched for that is not packaged.
pub fn run(args: PackageArgs) -> anyhow::Result<()> {
    let key = args
        .sign_key
        .as_deref()
        .map(|file| GuestSigningKey::read(file).map(|key| (file, key)))
        .transpose()?;
    let options = PackageOptions {
        guests: args.guests,
        config: args.config,
        installer: args.installer,
        output: args.output,
        tag: args.tag,
        architecture: args.architecture,
        epoch: args.epoch,
    };
    let files = wdp_guest_package::collect_inputs(&options.guests, options.config.as_deref())?;
    let engine = PolicyEngine::new(EngineSettings::default())?;
    for file in files.iter().filter(|f| f.is_guest()) {
        engine
            .load_bytes(&file.path, &file.bytes)
            .with_context(|| format!("{}: not a guest this host loads", file.path))?;
    }
    let signed = match &key {
        Some((file, key)) => sign_guests(&options.guests, &files, file, key)?,
        None => Signed::default(),
    };
    let report = match package(&options) {
        Ok(report) => report,
        Err(error) => {
            signed.take_back();
            return Err(error.into());
        }
    };
    signed.print();
    println!("wrote {}", report.output.display());
    for file in &report.files {
        println!("  {} {}", file.path, file.digest);
    }
    println!(
        "layer {} ({} bytes)",
        report.layer_digest, report.layer_bytes
    );
    println!("digest {}", report.manifest_digest);
    Ok(())
}

/// The signatures `package --sign-key` wrote, each with what its file held
/// before (`None`: no file), to take back should packaging fail.
#[derive(Default)]
struct Signed {
    written: Vec<(PathBuf, Option<Vec<u8>>)>,
    lines: Vec<String>,
}

impl Signed {
    /// Puts every signature file back as it was.
    fn take_back(&self) {
        for (path, before) in self.written.iter().rev() {
            let _ = match before {
                Some(bytes) => std::fs::write(path, bytes),
                None => std::fs::remove_file(path),
            };
        }
    }

    /// Prints one line per guest signed.
    fn print(&self) {
        for line in &self.lines {
            println!("{line}");
        }
    }
}

/// Writes a signature beside every guest of `files` (collected from
/// `guests`, each loaded already) with `key`, read from `key_file`; on a
/// failure, the signatures written so far are taken back.
fn sign_guests(
    guests: &Path,
    files: &[wdp_guest_package::PackagedFile],
    key_file: &Path,
    key: &GuestSigningKey,
) -> anyhow::Result<Signed> {
    let mut signed = Signed::default();
    for file in files.iter().filter(|f| f.is_guest()) {
        let relative = file.path.strip_prefix("guests/").unwrap_or(&file.path);
        let signature = signature_path(&guests.join(relative));
        let before = std::fs::read(&signature).ok();
        if let Err(error) = std::fs::write(&signature, key.sign(&file.bytes)) {
            signed.take_back();
            return Err(error).with_context(|| format!("cannot write {}", signature.display()));
        }
        signed.written.push((signature, before));
        signed.lines.push(format!(
            "signed {} with {} ({})",
            file.path,
            key_file.display(),
            key.public().fingerprint()
        ));
    }
    Ok(signed)
}
