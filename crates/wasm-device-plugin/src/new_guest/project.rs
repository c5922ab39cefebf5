//! The files of a new guest project: the templates of `new_guest/<language>/`
//! (one for the top of the source and one per hook) put together, the WIT
//! world exporting the chosen hooks, the resource config naming the built
//! guest, the fixture host root and the README's three commands.

use std::fmt::Write as _;

use wdp_policy::Hook;

use super::Lang;

/// The WIT contract every project carries in `wit/deps/policy/`.
const POLICY_WIT: &str = include_str!("../../../../wit/policy.wit");

/// The componentize-js and preview2-shim versions the repository's own
/// JavaScript guests are built with (`guests/polyglot/build.sh`).
const POLYGLOT_JS_PACKAGE: &str = include_str!("../../../../guests/polyglot/js/package.json");

/// Where the two fake device nodes of the fixture live, and the glob the
/// generated resource selects them with.
const FIXTURE_NODES: [&str; 2] = ["dev/example0", "dev/example1"];
const NODES_GLOB: &str = "/dev/example*";

impl Lang {
    pub(super) fn title(self) -> &'static str {
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

pub(super) fn hook_list(hooks: &[Hook]) -> String {
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
pub(super) fn commands(lang: Lang, name: &str) -> [String; 3] {
    [
        build_command(lang, name),
        "wasm-device-plugin test --config-dir config --host-root fixture".to_string(),
        format!("wasm-device-plugin package --guests config/guests --output {name}.oci.tar"),
    ]
}

/// The hooks a project can be scaffolded with (the DRA hooks of WIT 0.1.2
/// and 0.1.3 have examples instead: `guests/gpu-partitions`,
/// `guests/vfio-guard`, `guests/polyglot`).
pub(super) const SCAFFOLDED: [Hook; 5] = [
    Hook::Discovery,
    Hook::Health,
    Hook::PreferredAllocation,
    Hook::Allocate,
    Hook::PreStart,
];

/// A hook outside [`SCAFFOLDED`]: `new-guest` refuses it when parsing its
/// arguments, so no project is ever made with one.
fn unscaffolded(hook: Hook) -> &'static str {
    unreachable!("new-guest refuses the {hook} hook before making a project")
}

/// Every file of the project: (path relative to the project, content).
pub(super) fn project(lang: Lang, name: &str, hooks: &[Hook]) -> Vec<(String, String)> {
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
    files.extend(match lang {
        Lang::Rust => rust_files(hooks, &fill),
        Lang::Python => python_files(hooks, &fill),
        Lang::Javascript => javascript_files(hooks, &fill),
        Lang::C => c_files(hooks, &fill),
    });
    files
}

/// The Rust project's own files; `fill` puts the name and hooks into a
/// template.
fn rust_files(hooks: &[Hook], fill: &dyn Fn(&str) -> String) -> Vec<(String, String)> {
    let mut source = fill(include_str!("rust/lib.rs"));
    for hook in hooks {
        source.push_str(match hook {
            Hook::Discovery => include_str!("rust/discovery.rs"),
            Hook::Health => include_str!("rust/health.rs"),
            Hook::PreferredAllocation => include_str!("rust/preferred_allocation.rs"),
            Hook::Allocate => include_str!("rust/allocate.rs"),
            Hook::PreStart => include_str!("rust/pre_start.rs"),
            _ => unscaffolded(*hook),
        });
    }
    vec![
        (
            "Cargo.toml".to_string(),
            fill(include_str!("rust/Cargo.toml")),
        ),
        ("src/lib.rs".to_string(), source),
    ]
}

/// The Python project's own files; `fill` puts the name and hooks into a
/// template.
fn python_files(hooks: &[Hook], fill: &dyn Fn(&str) -> String) -> Vec<(String, String)> {
    let mut source =
        fill(include_str!("python/app.py")).replace("{{imports}}", &python_imports(hooks));
    for hook in hooks {
        source.push_str(match hook {
            Hook::Discovery => include_str!("python/discovery.py"),
            Hook::Health => include_str!("python/health.py"),
            Hook::PreferredAllocation => include_str!("python/preferred_allocation.py"),
            Hook::Allocate => include_str!("python/allocate.py"),
            Hook::PreStart => include_str!("python/pre_start.py"),
            _ => unscaffolded(*hook),
        });
    }
    vec![
        ("app.py".to_string(), source),
        (
            "build.sh".to_string(),
            fill(include_str!("python/build.sh")),
        ),
    ]
}

/// The JavaScript project's own files; `fill` puts the name and hooks
/// into a template.
fn javascript_files(hooks: &[Hook], fill: &dyn Fn(&str) -> String) -> Vec<(String, String)> {
    let imports = if hooks
        .iter()
        .any(|h| matches!(h, Hook::Health | Hook::PreStart))
    {
        format!(
            "\nimport {{ log }} from 'wasm-device-plugin:policy/host@{}';\n",
            wit_version()
        )
    } else {
        String::new()
    };
    let mut source = fill(include_str!("javascript/guest.js")).replace("{{imports}}", &imports);
    for hook in hooks {
        source.push_str(match hook {
            Hook::Discovery => include_str!("javascript/discovery.js"),
            Hook::Health => include_str!("javascript/health.js"),
            Hook::PreferredAllocation => include_str!("javascript/preferred_allocation.js"),
            Hook::Allocate => include_str!("javascript/allocate.js"),
            Hook::PreStart => include_str!("javascript/pre_start.js"),
            _ => unscaffolded(*hook),
        });
    }
    let (componentize_js, preview2_shim) = polyglot_js_versions();
    vec![
        ("guest.js".to_string(), source),
        (
            "package.json".to_string(),
            fill(include_str!("javascript/package.json"))
                .replace("{{componentize_js}}", &componentize_js)
                .replace("{{preview2_shim}}", &preview2_shim),
        ),
        (
            "build.mjs".to_string(),
            fill(include_str!("javascript/build.mjs")),
        ),
        (
            "build.sh".to_string(),
            fill(include_str!("javascript/build.sh")),
        ),
    ]
}

/// The C project's own files; `fill` puts the name and hooks into a
/// template.
fn c_files(hooks: &[Hook], fill: &dyn Fn(&str) -> String) -> Vec<(String, String)> {
    let mut source = fill(include_str!("c/guest.c"));
    for hook in hooks {
        source.push_str(match hook {
            Hook::Discovery => include_str!("c/discovery.c"),
            Hook::Health => include_str!("c/health.c"),
            Hook::PreferredAllocation => include_str!("c/preferred_allocation.c"),
            Hook::Allocate => include_str!("c/allocate.c"),
            Hook::PreStart => include_str!("c/pre_start.c"),
            _ => unscaffolded(*hook),
        });
    }
    vec![
        ("guest.c".to_string(), source),
        ("build.sh".to_string(), fill(include_str!("c/build.sh"))),
    ]
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

/// The WIT package version of the contract, e.g. `0.1.3`.
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
#[path = "project_tests.rs"]
mod tests;
