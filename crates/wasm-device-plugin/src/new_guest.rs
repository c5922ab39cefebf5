//! `new-guest`: writes a guest project to start from, in Rust, Python,
//! JavaScript or C, with one working example per chosen hook, a resource
//! config naming the built guest, and a fixture host root, so that
//! `wasm-device-plugin test --config-dir config --host-root fixture`
//! answers as soon as the guest is built. The project is written into a
//! temporary folder beside (or inside) the target and moved into place at
//! the end, so an error leaves nothing half-written.
//!
//! The templates live in `new_guest/<language>/`: one file for the top of
//! the source and one per hook, put together here.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use wdp_policy::Hook;

/// The WIT contract every project carries in `wit/deps/policy/`.
const POLICY_WIT: &str = include_str!("../../../wit/policy.wit");

/// The componentize-js and preview2-shim versions the repository's own
/// JavaScript guests are built with (`guests/polyglot/build.sh`).
const POLYGLOT_JS_PACKAGE: &str = include_str!("../../../guests/polyglot/js/package.json");

/// Where the two fake device nodes of the fixture live, and the glob the
/// generated resource selects them with.
const FIXTURE_NODES: [&str; 2] = ["dev/example0", "dev/example1"];
const NODES_GLOB: &str = "/dev/example*";

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
    text.trim()
        .parse::<Hook>()
        .map_err(|error| error.to_string())
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

impl Lang {
    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Javascript => "JavaScript",
            Lang::C => "C",
        }
    }

    /// The file holding the hooks.
    fn source(self) -> &'static str {
        match self {
            Lang::Rust => "src/lib.rs",
            Lang::Python => "app.py",
            Lang::Javascript => "guest.js",
            Lang::C => "guest.c",
        }
    }
}

fn hook_list(hooks: &[Hook]) -> String {
    hooks
        .iter()
        .map(Hook::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The build command of the README.
fn build_command(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Rust => format!(
            "cargo build --release --target wasm32-wasip2 && mkdir -p config/guests && cp target/wasm32-wasip2/release/{}.wasm config/guests/{name}.wasm",
            name.replace('-', "_")
        ),
        Lang::Python | Lang::Javascript | Lang::C => "bash build.sh".to_string(),
    }
}

/// The README's three commands: build, test, package.
fn commands(lang: Lang, name: &str) -> [String; 3] {
    [
        build_command(lang, name),
        "wasm-device-plugin test --config-dir config --host-root fixture".to_string(),
        format!("wasm-device-plugin package --guests config/guests --output {name}.oci.tar"),
    ]
}

/// Every file of the project: (path relative to the project, content).
fn project(lang: Lang, name: &str, hooks: &[Hook]) -> Vec<(String, String)> {
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{hooks}}", &hook_list(hooks))
    };
    let mut files = vec![
        ("wit/world.wit".to_string(), world_wit(hooks)),
        (
            "wit/deps/policy/policy.wit".to_string(),
            POLICY_WIT.to_string(),
        ),
        ("config/host.toml".to_string(), host_toml(lang)),
        (format!("config/{name}.toml"), resource_toml(name, hooks)),
        (".gitignore".to_string(), gitignore(lang, name)),
        ("README.md".to_string(), readme(lang, name, hooks)),
    ];
    for node in FIXTURE_NODES {
        files.push((format!("fixture/{node}"), String::new()));
    }
    match lang {
        Lang::Rust => {
            files.push((
                "Cargo.toml".to_string(),
                fill(include_str!("new_guest/rust/Cargo.toml")),
            ));
            let mut source = fill(include_str!("new_guest/rust/lib.rs"));
            for hook in hooks {
                source.push_str(match hook {
                    Hook::Discovery => include_str!("new_guest/rust/discovery.rs"),
                    Hook::Health => include_str!("new_guest/rust/health.rs"),
                    Hook::PreferredAllocation => {
                        include_str!("new_guest/rust/preferred_allocation.rs")
                    }
                    Hook::Allocate => include_str!("new_guest/rust/allocate.rs"),
                    Hook::PreStart => include_str!("new_guest/rust/pre_start.rs"),
                });
            }
            files.push(("src/lib.rs".to_string(), source));
        }
        Lang::Python => {
            let mut source = fill(include_str!("new_guest/python/app.py"))
                .replace("{{imports}}", &python_imports(hooks));
            for hook in hooks {
                source.push_str(match hook {
                    Hook::Discovery => include_str!("new_guest/python/discovery.py"),
                    Hook::Health => include_str!("new_guest/python/health.py"),
                    Hook::PreferredAllocation => {
                        include_str!("new_guest/python/preferred_allocation.py")
                    }
                    Hook::Allocate => include_str!("new_guest/python/allocate.py"),
                    Hook::PreStart => include_str!("new_guest/python/pre_start.py"),
                });
            }
            files.push(("app.py".to_string(), source));
            files.push((
                "build.sh".to_string(),
                fill(include_str!("new_guest/python/build.sh")),
            ));
        }
        Lang::Javascript => {
            let imports = if hooks
                .iter()
                .any(|h| matches!(h, Hook::Health | Hook::PreStart))
            {
                "\nimport { log } from 'wasm-device-plugin:policy/host@0.1.1';\n"
            } else {
                ""
            };
            let mut source =
                fill(include_str!("new_guest/javascript/guest.js")).replace("{{imports}}", imports);
            for hook in hooks {
                source.push_str(match hook {
                    Hook::Discovery => include_str!("new_guest/javascript/discovery.js"),
                    Hook::Health => include_str!("new_guest/javascript/health.js"),
                    Hook::PreferredAllocation => {
                        include_str!("new_guest/javascript/preferred_allocation.js")
                    }
                    Hook::Allocate => include_str!("new_guest/javascript/allocate.js"),
                    Hook::PreStart => include_str!("new_guest/javascript/pre_start.js"),
                });
            }
            files.push(("guest.js".to_string(), source));
            let (componentize_js, preview2_shim) = polyglot_js_versions();
            files.push((
                "package.json".to_string(),
                fill(include_str!("new_guest/javascript/package.json"))
                    .replace("{{componentize_js}}", &componentize_js)
                    .replace("{{preview2_shim}}", &preview2_shim),
            ));
            files.push((
                "build.mjs".to_string(),
                fill(include_str!("new_guest/javascript/build.mjs")),
            ));
            files.push((
                "build.sh".to_string(),
                fill(include_str!("new_guest/javascript/build.sh")),
            ));
        }
        Lang::C => {
            let mut source = fill(include_str!("new_guest/c/guest.c"));
            for hook in hooks {
                source.push_str(match hook {
                    Hook::Discovery => include_str!("new_guest/c/discovery.c"),
                    Hook::Health => include_str!("new_guest/c/health.c"),
                    Hook::PreferredAllocation => {
                        include_str!("new_guest/c/preferred_allocation.c")
                    }
                    Hook::Allocate => include_str!("new_guest/c/allocate.c"),
                    Hook::PreStart => include_str!("new_guest/c/pre_start.c"),
                });
            }
            files.push(("guest.c".to_string(), source));
            files.push((
                "build.sh".to_string(),
                fill(include_str!("new_guest/c/build.sh")),
            ));
        }
    }
    files
}

/// The versions `guests/polyglot/js/package.json` pins.
fn polyglot_js_versions() -> (String, String) {
    let package: serde_json::Value =
        serde_json::from_str(POLYGLOT_JS_PACKAGE).expect("guests/polyglot/js/package.json");
    let version = |name: &str| {
        package["dependencies"][name]
            .as_str()
            .unwrap_or_else(|| panic!("guests/polyglot/js/package.json pins {name}"))
            .to_string()
    };
    (
        version("@bytecodealliance/componentize-js"),
        version("@bytecodealliance/preview2-shim"),
    )
}

/// The WIT package version of the contract, e.g. `0.1.1`.
fn wit_version() -> &'static str {
    POLICY_WIT
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("package wasm-device-plugin:policy@")?
                .strip_suffix(';')
        })
        .expect("wit/policy.wit names its package")
}

/// `world guest`: the hooks chosen as exports, with the imports the
/// repository's own per-hook worlds have (`claim` for allocate and
/// pre-start).
fn world_wit(hooks: &[Hook]) -> String {
    let version = wit_version();
    let mut wit = String::from(
        "// The world this guest implements: the imports it may use and the hooks\n\
         // it exports. To add a hook, export it here and implement it (and name\n\
         // the guest for it in the resource's config); the hooks, what they are\n\
         // given and what they answer: deps/policy/policy.wit.\n\
         package local:guest;\n\nworld guest {\n",
    );
    let mut imports = vec!["host", "hardware"];
    if hooks
        .iter()
        .any(|h| matches!(h, Hook::Allocate | Hook::PreStart))
    {
        imports.push("claim");
    }
    for import in imports {
        let _ = writeln!(
            wit,
            "    import wasm-device-plugin:policy/{import}@{version};"
        );
    }
    for hook in hooks {
        let _ = writeln!(
            wit,
            "    export wasm-device-plugin:policy/{}@{version};",
            hook.interface()
        );
    }
    wit.push_str("}\n");
    wit
}

fn python_imports(hooks: &[Hook]) -> String {
    let mut lines = Vec::new();
    if hooks
        .iter()
        .any(|h| matches!(h, Hook::PreferredAllocation | Hook::PreStart))
    {
        lines.push("from componentize_py_types import Err".to_string());
    }
    lines.push("from wit_world import exports".to_string());
    let modules: Vec<String> = hooks
        .iter()
        .filter(|h| matches!(h, Hook::Health | Hook::PreferredAllocation | Hook::Allocate))
        .map(|h| h.interface().replace('-', "_"))
        .collect();
    if !modules.is_empty() {
        lines.push(format!(
            "from wit_world.exports import {}",
            modules.join(", ")
        ));
    }
    let mut imports = Vec::new();
    if hooks
        .iter()
        .any(|h| matches!(h, Hook::Health | Hook::PreStart))
    {
        imports.push("host");
    }
    if hooks
        .iter()
        .any(|h| matches!(h, Hook::Discovery | Hook::Allocate | Hook::PreStart))
    {
        imports.push("types");
    }
    if !imports.is_empty() {
        lines.push(format!(
            "from wit_world.imports import {}",
            imports.join(", ")
        ));
    }
    lines.join("\n") + "\n"
}

fn host_toml(lang: Lang) -> String {
    let mut text = String::from(
        "# Host settings (docs/config-reference.md of wasm-device-plugin).\nversion = 1\n",
    );
    if matches!(lang, Lang::Python | Lang::Javascript) {
        text.push_str(
            "# A Python or JavaScript component takes seconds to compile: keep the\n\
             # compiled code between runs of `test` (recompiled when the guest changes).\n\
             precompiled-cache-dir = \".compiled\"\n",
        );
    }
    text
}

fn resource_toml(name: &str, hooks: &[Hook]) -> String {
    let mut text = format!(
        "# The resource this guest serves. `wasm-device-plugin test` runs it against\n\
         # fixture/, a host root with two fake device nodes; on a node, select the\n\
         # real hardware instead ([[nodes]], [[pci]] or [[usb]]: docs/config-reference.md\n\
         # of wasm-device-plugin). [guest-config] values reach the guest as\n\
         # host.config().\n\
         version = 1\n\
         resource = \"example.com/{name}\"\n\n\
         [[nodes]]\n\
         path = \"{NODES_GLOB}\"\n"
    );
    for hook in hooks {
        let _ = write!(text, "\n[hooks.{hook}]\nguest = \"guests/{name}.wasm\"\n");
    }
    text
}

fn gitignore(lang: Lang, name: &str) -> String {
    let mut text = format!("# Built by the README's commands.\n/config/guests/\n/{name}.oci.tar\n");
    match lang {
        Lang::Rust => text.push_str("/target/\n"),
        Lang::Python => text.push_str("/config/.compiled/\n__pycache__/\n"),
        Lang::Javascript => text.push_str("/config/.compiled/\n/node_modules/\n"),
        Lang::C => text.push_str("/gen/\n"),
    }
    text
}

fn readme(lang: Lang, name: &str, hooks: &[Hook]) -> String {
    let [build, test, package] = commands(lang, name);
    let title = lang.title();
    let source = lang.source();
    let toolchain = match lang {
        Lang::Rust => {
            "Rust with the `wasm32-wasip2` target (`rustup target add wasm32-wasip2`);\n\
             cargo fetches `wit-bindgen` from crates.io on the first build. The\n\
             wasm-device-plugin repository's `guests/README.md` covers Rust guests\n\
             (and its SDK, `guests/sdk`, for guests built inside the repository)."
        }
        Lang::Python => {
            "componentize-py 0.25.1 (PyPI). `build.sh` takes it from\n\
             `~/.cache/wdp-polyglot/venv`, where `bash guests/polyglot/build.sh` of the\n\
             wasm-device-plugin repository installs it, or from PATH;\n\
             `docs/guests/python.md` of that repository explains installing it."
        }
        Lang::Javascript => {
            "Node.js 20 or later with npm; `build.sh` installs componentize-js (the\n\
             version `package.json` pins) with `npm install` on its first run.\n\
             `docs/guests/javascript.md` of the wasm-device-plugin repository explains\n\
             the toolchain."
        }
        Lang::C => {
            "clang with wasi-libc (Debian: `clang lld wasi-libc libclang-rt-dev-wasm32`),\n\
             wit-bindgen-cli 0.63.0 (C generator), wasm-tools and the WASI preview1\n\
             reactor adapter. `build.sh` takes them from `~/.cache/wdp-polyglot`, where\n\
             `bash guests/polyglot/build.sh` of the wasm-device-plugin repository\n\
             installs them, or from PATH; `docs/guests/c.md` of that repository\n\
             explains installing them."
        }
    };
    let layout_source = match lang {
        Lang::Rust => "- `src/lib.rs`: the hooks, one trait implementation each; `Cargo.toml`.\n",
        Lang::Python => "- `app.py`: the hooks, one class each; `build.sh`: componentize-py.\n",
        Lang::Javascript => {
            "- `guest.js`: the hooks, one exported object each; `build.mjs`: the\n  \
             componentize-js call; `build.sh`: npm install (once), then build.mjs.\n"
        }
        Lang::C => {
            "- `guest.c`: the hooks, one function each (declared in `gen/guest.h`,\n  \
             generated by `build.sh`, which also compiles and wraps the component).\n"
        }
    };
    let hook_list = hook_list(hooks);
    format!(
        "# {name}\n\n\
         A wasm-device-plugin policy guest in {title} implementing {hook_list},\n\
         generated by `wasm-device-plugin new-guest`. Each hook in `{source}` is a\n\
         small working example: replace it with your policy.\n\n\
         Needs {toolchain}\n\n\
         ```sh\n{build}\n{test}\n{package}\n```\n\n\
         1. builds the guest into `config/guests/{name}.wasm`;\n\
         2. loads it as the host does (the same checks), runs every hook of\n   \
            `config/{name}.toml` against `fixture/` and prints what each answered;\n\
         3. writes the guest as a reproducible OCI image archive to push to a\n   \
            registry and mount as an image volume (it prints the digest to pin).\n\n\
         ## Layout\n\n\
         {layout_source}\
         - `wit/world.wit`: the hooks this guest exports and the host interfaces it\n  \
           imports; `wit/deps/policy/policy.wit`: the contract\n  \
           (`wasm-device-plugin:policy@{version}`), what each hook is given and may\n  \
           answer. To add a hook, export it in `world.wit`, implement it, and name\n  \
           the guest for it in `config/{name}.toml` (`[hooks.<hook>]`).\n\
         - `config/`: `host.toml` and `{name}.toml`, the resource that uses the guest\n  \
           (device nodes `{NODES_GLOB}`; on a real node, select your hardware:\n  \
           `docs/config-reference.md` of wasm-device-plugin).\n\
         - `fixture/`: a host root for `test`, with two fake device nodes\n  \
           (`/dev/example0`, `/dev/example1`). `wasm-device-plugin record` snapshots a\n  \
           real node's hardware into such a tree.\n\n\
         The guest guide (`docs/guest-guide.md` of wasm-device-plugin) explains the\n\
         hooks, the host's imports, limits and failures.\n",
        version = wit_version(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_package_names() {
        for (dir, name) in [
            ("my-guest", "my-guest"),
            ("/tmp/x/My_Guest.v2", "my-guest-v2"),
            ("--x--", "x"),
            ("42", "guest-42"),
            ("", "guest"),
            ("test", "test-guest"),
            ("host", "host-guest"),
            ("ünïcode", "n-code"),
        ] {
            assert_eq!(guest_name(Path::new(dir)), name, "{dir:?}");
        }
        assert_eq!(guest_name(Path::new(&"a".repeat(80))).len(), 40);
    }

    #[test]
    fn world_exports_the_hooks() {
        let wit = world_wit(&[Hook::Health, Hook::Allocate]);
        assert!(wit.contains("export wasm-device-plugin:policy/health@0.1.1;"));
        assert!(wit.contains("export wasm-device-plugin:policy/allocate@0.1.1;"));
        assert!(wit.contains("import wasm-device-plugin:policy/claim@0.1.1;"));
        assert!(!world_wit(&[Hook::Health]).contains("claim"));
    }
}
