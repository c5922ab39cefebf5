//! `new-guest`: the project it writes, in each language, builds with the
//! README's build command and that language's toolchain as the repository
//! installs it (Rust: rustup's `wasm32-wasip2`; Python, JavaScript and C:
//! `bash guests/polyglot/build.sh`), and `wasm-device-plugin test` on its
//! config and fixture then shows every chosen hook answering. Bad input is
//! refused with a message naming it, and nothing is written.
//!
//! A missing toolchain fails the test with what to run; it never skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::support::run_to_end;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The README's test command (also printed by `new-guest`).
const TEST_COMMAND: &str = "wasm-device-plugin test --config-dir config --host-root fixture";

/// Where `guests/polyglot/build.sh` installs its tools.
fn polyglot_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("WDP_POLYGLOT_CACHE") {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
    cache.join("wdp-polyglot")
}

/// Fails (never skips) when a polyglot tool is missing.
fn require(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{what} is missing ({}): install the polyglot toolchains first with \
         `bash guests/polyglot/build.sh` (then run the tests again)",
        path.display()
    );
}

fn require_command(name: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        found,
        "{name} is not on PATH: install the polyglot toolchains first with \
         `bash guests/polyglot/build.sh` (then run the tests again)"
    );
}

/// A project written by `new-guest` into a fresh temporary folder.
struct Project {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Project {
    fn new(lang: &str, hooks: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my-guest");
        let (code, stdout, stderr) = run_to_end(&[
            "new-guest",
            "--lang",
            lang,
            "--hooks",
            hooks,
            dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "new-guest failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("guest `my-guest`") && stdout.contains(TEST_COMMAND),
            "new-guest should say what it wrote and what to run next:\n{stdout}"
        );
        Project { _tmp: tmp, dir }
    }

    /// The three commands of the README's shell block.
    fn readme_commands(&self) -> Vec<String> {
        let readme = std::fs::read_to_string(self.dir.join("README.md")).unwrap();
        let block = readme
            .split("```sh\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap_or_else(|| panic!("no ```sh block in the README:\n{readme}"));
        let commands: Vec<String> = block.lines().map(str::to_owned).collect();
        assert_eq!(commands.len(), 3, "build, test, package:\n{readme}");
        assert_eq!(commands[1], TEST_COMMAND);
        assert_eq!(
            commands[2],
            "wasm-device-plugin package --guests config/guests --output my-guest.oci.tar"
        );
        commands
    }

    /// Runs the README's build command in the project, `tweak` adjusting
    /// its environment.
    fn build_with(&self, tweak: impl FnOnce(&mut Command)) -> Output {
        let build = &self.readme_commands()[0];
        let mut command = Command::new("bash");
        command.args(["-c", build]).current_dir(&self.dir);
        tweak(&mut command);
        command.output().unwrap()
    }

    fn build(&self) {
        let started = Instant::now();
        let out = self.build_with(|_| {});
        assert_build_ok(&out);
        eprintln!("built in {:.1} s", started.elapsed().as_secs_f64());
    }

    /// `wasm-device-plugin test` on the project's config and fixture (the
    /// README's command, from the project folder's point of view): its
    /// output, after asserting it succeeded.
    fn test(&self) -> String {
        let started = Instant::now();
        let (config, fixture) = (self.dir.join("config"), self.dir.join("fixture"));
        let (code, stdout, stderr) = run_to_end(&[
            "test",
            "--config-dir",
            config.to_str().unwrap(),
            "--host-root",
            fixture.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "test failed:\n{stdout}\n{stderr}");
        eprintln!("test answered in {:.1} s", started.elapsed().as_secs_f64());
        stdout
    }
}

fn assert_build_ok(out: &Output) {
    assert!(
        out.status.success(),
        "the README's build command failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `test` shows for the allocate and health examples on the fixture's
/// two device nodes.
fn assert_allocate_and_health(stdout: &str) {
    for hook in ["health", "allocate"] {
        assert!(
            stdout.contains(&format!("hook {hook}: guest my-guest.wasm")),
            "the {hook} hook should be the new guest:\n{stdout}"
        );
    }
    assert!(stdout.contains("discovery + health: 2 devices"), "{stdout}");
    for id in ["example0", "example1"] {
        let line = stdout
            .lines()
            .find(|line| line.trim_start().starts_with(id))
            .unwrap_or_else(|| panic!("no line for {id}:\n{stdout}"));
        assert!(
            line.contains("Healthy") && line.contains("(every candidate is present)"),
            "the health example answered for {id}:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("env EXAMPLE_VISIBLE_DEVICES=example0,example1"),
        "the allocate example answered:\n{stdout}"
    );
    assert!(!stdout.contains("FAILED"), "{stdout}");
}

/// Variables of the test's own cargo run that must not reach the
/// project's build (they describe this build, not that one).
fn clean_cargo_env(command: &mut Command) {
    const KEPT: &[&str] = &[
        "CARGO_HOME",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
    ];
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let cargo = key.starts_with("CARGO") && !KEPT.iter().any(|p| key.starts_with(p));
        if cargo || key.starts_with("RUSTFLAGS") || key.starts_with("RUSTC_") {
            command.env_remove(key);
        }
    }
}

#[test]
fn rust_project_builds_and_answers() {
    let project = Project::new("rust", "allocate,health");
    let cargo_toml = std::fs::read_to_string(project.dir.join("Cargo.toml")).unwrap();
    assert!(cargo_toml.contains("[workspace]"), "{cargo_toml}");
    // The project's target folder is kept between runs (the README's command
    // builds into `target/` of the project: a link to it).
    let target = Path::new(REPO).join("target/new-guest-e2e/rust");
    std::fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, project.dir.join("target")).unwrap();

    let started = Instant::now();
    // Offline first: wit-bindgen and its dependencies are in cargo's cache
    // once the repository's guests were built.
    let mut out = project.build_with(|command| {
        clean_cargo_env(command);
        command.env("CARGO_NET_OFFLINE", "true");
    });
    if !out.status.success() {
        eprintln!(
            "offline build failed, trying online:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out = project.build_with(clean_cargo_env);
    }
    assert_build_ok(&out);
    eprintln!("built in {:.1} s", started.elapsed().as_secs_f64());

    assert_allocate_and_health(&project.test());

    // The README's third command.
    let archive = project.dir.join("my-guest.oci.tar");
    let (code, stdout, stderr) = run_to_end(&[
        "package",
        "--guests",
        project.dir.join("config/guests").to_str().unwrap(),
        "--output",
        archive.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "package failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("guests/my-guest.wasm sha256:"), "{stdout}");
    assert!(archive.is_file());
}

#[test]
fn python_project_builds_and_answers() {
    require(
        &polyglot_cache().join("venv/bin/componentize-py"),
        "componentize-py",
    );
    let project = Project::new("python", "allocate,health");
    project.build();
    assert_allocate_and_health(&project.test());
}

#[test]
fn javascript_project_builds_and_answers() {
    require_command("node");
    let node_modules = Path::new(REPO).join("guests/polyglot/js/node_modules");
    require(
        &node_modules.join("@bytecodealliance/componentize-js"),
        "componentize-js",
    );
    let project = Project::new("javascript", "allocate,health");
    // The versions the repository's JavaScript guests use, so its
    // node_modules serves (instead of an `npm install` per run).
    let package = std::fs::read_to_string(project.dir.join("package.json")).unwrap();
    let ours =
        std::fs::read_to_string(Path::new(REPO).join("guests/polyglot/js/package.json")).unwrap();
    let pins = |text: &str| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(text).unwrap()["dependencies"].clone()
    };
    assert_eq!(pins(&package), pins(&ours));
    std::os::unix::fs::symlink(&node_modules, project.dir.join("node_modules")).unwrap();
    project.build();
    assert_allocate_and_health(&project.test());
}

#[test]
fn c_project_builds_and_answers() {
    let cache = polyglot_cache();
    require(&cache.join("cargo/bin/wit-bindgen"), "wit-bindgen");
    require(&cache.join("venv/bin/wasm-tools"), "wasm-tools");
    let adapter = std::fs::read_dir(&cache)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            e.path()
                .join("wasi_snapshot_preview1.reactor.wasm")
                .is_file()
        });
    assert!(
        adapter,
        "the WASI preview1 adapter is missing from {}: install the polyglot toolchains \
         first with `bash guests/polyglot/build.sh` (then run the tests again)",
        cache.display()
    );
    require_command("clang");
    let project = Project::new("c", "allocate,health");
    project.build();
    assert_allocate_and_health(&project.test());
}

/// Asserts a refusal: non-zero exit, `needle` in the message, and nothing
/// left in `parent` but what was there before.
fn assert_refused(args: &[&str], needle: &str, parent: &Path, before: &[String]) -> String {
    let (code, stdout, stderr) = run_to_end(args);
    assert_ne!(code, 0, "{args:?} should fail:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: the message should name {needle:?}:\n{stderr}"
    );
    assert_eq!(listing(parent), before, "{args:?} wrote something");
    stderr
}

/// Every path under `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            paths.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    paths.sort();
    paths
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my-guest");
    let dir_arg = dir.to_str().unwrap();

    assert_refused(
        &["new-guest", "--lang", "cobol", "--hooks", "health", dir_arg],
        "cobol",
        tmp.path(),
        &[],
    );
    let stderr = assert_refused(
        &[
            "new-guest",
            "--lang",
            "rust",
            "--hooks",
            "allocate,bogus",
            dir_arg,
        ],
        "bogus",
        tmp.path(),
        &[],
    );
    assert!(
        stderr.contains("preferred-allocation") && stderr.contains("pre-start"),
        "the message should list the hooks:\n{stderr}"
    );

    // A folder holding a file: refused, the file untouched.
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let before = listing(tmp.path());
    assert_refused(
        &["new-guest", "--lang", "rust", "--hooks", "health", dir_arg],
        dir_arg,
        tmp.path(),
        &before,
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );

    // A file where the folder should go.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let before = listing(tmp.path());
    assert_refused(
        &[
            "new-guest",
            "--lang",
            "c",
            "--hooks",
            "health",
            file.to_str().unwrap(),
        ],
        file.to_str().unwrap(),
        tmp.path(),
        &before,
    );

    // An empty folder is fine, and is filled in place.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, stdout, stderr) = run_to_end(&[
        "new-guest",
        "--lang",
        "js",
        "--hooks",
        "pre-start,discovery,pre-start",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let world = std::fs::read_to_string(empty.join("wit/world.wit")).unwrap();
    let exports: Vec<&str> = world
        .lines()
        .filter(|line| line.trim_start().starts_with("export "))
        .collect();
    assert_eq!(
        exports,
        [
            "    export wasm-device-plugin:policy/discovery@0.1.3;",
            "    export wasm-device-plugin:policy/pre-start@0.1.3;"
        ],
        "hooks in WIT order, once each"
    );
    assert!(empty.join("config/empty.toml").is_file());
    assert!(
        listing(tmp.path())
            .iter()
            .all(|path| !path.contains(".new-guest-")),
        "no temporary folder is left behind"
    );
}
