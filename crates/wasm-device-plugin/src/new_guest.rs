//! `new-guest`: writes a guest project to start from, in Rust, Python,
//! JavaScript or C, with one working example per chosen hook, a resource
//! config naming the built guest, and a fixture host root, so that
//! `wasm-device-plugin test --config-dir config --host-root fixture`
//! answers as soon as the guest is built. The project is written into a
//! temporary folder beside (or inside) the target and moved into place at
//! the end, so an error leaves nothing half-written.
//!
//! The project's files are put together in `project`, from the templates
//! in `new_guest/<language>/`; this module checks the request and writes
//! them into place.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use wdp_policy::Hook;

mod project;

use project::{commands, hook_list, project};

#[derive(Debug, clap::Args)]
pub struct NewGuestArgs {
    /// The language of the guest.
    #[arg(long, value_enum)]
    lang: Lang,

    /// The hooks the guest implements, comma-separated (discovery, health,
    /// preferred-allocation, allocate, pre-start): one working example each.
    #[arg(
        long,
        required = true,
        value_delimiter = ',',
        value_parser = parse_hook
    )]
    hooks: Vec<Hook>,

    /// The project folder to create (it may exist if empty). Its name,
    /// made a valid package name, names the guest and its resource.
    dir: PathBuf,
}

/// A language a project can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// wit-bindgen, built with cargo for wasm32-wasip2.
    Rust,
    /// componentize-py.
    Python,
    /// the componentize-js library API.
    #[value(alias = "js")]
    Javascript,
    /// wit-bindgen c, clang + wasi-libc, wasm-tools.
    C,
}

fn parse_hook(text: &str) -> Result<Hook, String> {
    let hook = text
        .trim()
        .parse::<Hook>()
        .map_err(|error| error.to_string())?;
    if project::SCAFFOLDED.contains(&hook) {
        Ok(hook)
    } else {
        Err(format!(
            "the {hook} hook (DRA only) has no scaffold: start from guests/gpu-partitions or guests/vfio-guard (Rust: device-taints-v2, passthrough) or guests/polyglot/*/sriov* (Python, JavaScript, C)"
        ))
    }
}

pub fn run(args: NewGuestArgs) -> anyhow::Result<()> {
    let mut hooks = args.hooks;
    hooks.sort();
    hooks.dedup();
    let target = Target::check(&args.dir)?;
    let name = guest_name(&target.name_source);
    let files = project(args.lang, &name, &hooks);
    target.write(&files)?;

    let dir = args.dir.display();
    let hook_list = hook_list(&hooks);
    println!(
        "wrote a {} guest `{name}` ({hook_list}) in {dir}",
        args.lang.title()
    );
    println!("\nnext (README.md says more):\n");
    println!("  cd {dir}");
    for command in commands(args.lang, &name) {
        println!("  {command}");
    }
    Ok(())
}

/// The folder to write: refused when it exists and is not an empty folder.
struct Target {
    dir: PathBuf,
    /// Whether `dir` exists already (empty).
    exists: bool,
    /// The path whose last component names the guest.
    name_source: PathBuf,
}

impl Target {
    fn check(dir: &Path) -> anyhow::Result<Self> {
        match fs::metadata(dir) {
            Err(error)
                if error.kind() == std::io::ErrorKind::NotFound
                    && fs::symlink_metadata(dir).is_ok() =>
            {
                bail!(
                    "{} exists and is not a folder (a dangling link)",
                    dir.display()
                )
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Target {
                dir: dir.to_owned(),
                exists: false,
                name_source: std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()),
            }),
            Err(error) => Err(error).with_context(|| format!("{}", dir.display())),
            Ok(meta) if !meta.is_dir() => {
                bail!("{} exists and is not a folder", dir.display())
            }
            Ok(_) => {
                let mut entries =
                    fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
                if entries.next().is_some() {
                    bail!(
                        "{} exists and is not empty: give a new or empty folder",
                        dir.display()
                    );
                }
                Ok(Target {
                    dir: dir.to_owned(),
                    exists: true,
                    name_source: fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned()),
                })
            }
        }
    }

    /// Writes `files` into a temporary folder, then moves it into place: a
    /// rename of the folder beside the target, or, for an existing empty
    /// target (perhaps the current directory), of each top-level entry of
    /// a temporary folder inside it.
    fn write(&self, files: &[(String, String)]) -> anyhow::Result<()> {
        let staging_parent = if self.exists {
            self.dir.clone()
        } else {
            let parent = match self.dir.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
                _ => PathBuf::from("."),
            };
            fs::create_dir_all(&parent)
                .with_context(|| format!("creating {}", parent.display()))?;
            parent
        };
        let staging = Staging::create(&staging_parent)?;
        for (path, text) in files {
            let file = staging.path.join(path);
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
            if path.ends_with(".sh") {
                use std::os::unix::fs::PermissionsExt;
                let mut permissions = fs::metadata(&file)?.permissions();
                permissions.set_mode(permissions.mode() | 0o111);
                fs::set_permissions(&file, permissions)?;
            }
        }
        if self.exists {
            let entries: Vec<_> = fs::read_dir(&staging.path)?
                .map(|entry| entry.map(|e| e.file_name()))
                .collect::<Result<_, _>>()?;
            let mut moved = Vec::new();
            for entry in entries {
                let (from, to) = (staging.path.join(&entry), self.dir.join(&entry));
                if let Err(error) = fs::rename(&from, &to) {
                    // Put back what was moved: the folder stays empty.
                    for entry in moved.iter().rev() {
                        let _ = fs::rename(self.dir.join(entry), staging.path.join(entry));
                    }
                    return Err(error)
                        .with_context(|| format!("moving {} into place", to.display()));
                }
                moved.push(entry);
            }
        } else {
            fs::rename(&staging.path, &self.dir).with_context(|| {
                format!(
                    "moving {} to {}",
                    staging.path.display(),
                    self.dir.display()
                )
            })?;
        }
        Ok(())
    }
}

/// A temporary folder, removed (with what it holds) unless moved away.
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn create(parent: &Path) -> anyhow::Result<Self> {
        for attempt in 0..100u32 {
            let path = parent.join(format!(".new-guest-{}-{attempt}.tmp", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Staging { path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(error).with_context(|| format!("creating {}", path.display()));
                }
            }
        }
        bail!("cannot create a temporary folder in {}", parent.display())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Gone already when it was renamed into place; empty when its
        // entries were.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Names that would clash with something as a package, crate or config
/// file name: Rust keywords, the standard crates, the host's own config.
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "core",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "host",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc-macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// The guest's name from the folder's: lower-case ASCII letters, digits
/// and single hyphens, starting with a letter, at most 40 characters
/// (so `example.com/<name>` is a valid resource name and `<name>` a valid
/// crate, npm package and file name).
fn guest_name(dir: &Path) -> String {
    let raw = dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name = String::new();
    for c in raw.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    let mut name = name.trim_end_matches('-').to_string();
    if name.is_empty() {
        name = "guest".to_string();
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name = format!("guest-{name}");
    }
    if RESERVED.contains(&name.as_str()) {
        name.push_str("-guest");
    }
    name.truncate(40);
    name.trim_end_matches('-').to_string()
}

#[cfg(test)]
#[path = "new_guest_tests.rs"]
mod tests;
