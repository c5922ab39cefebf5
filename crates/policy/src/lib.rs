//! x
#![allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "all-hooks",
    });
}
