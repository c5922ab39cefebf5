//! Generated bindings for the host imports (`host`, `hardware`). The
//! `types` interface maps onto the hand-written [`crate::types`] through
//! [`wit_types`], so imports lift and lower the host's own types.

wasmtime::component::bindgen!({
    inline: "
        package wdp:host;
        world imports {
            import wasm-device-plugin:policy/host@0.1.3;
            import wasm-device-plugin:policy/hardware@0.1.3;
            import wasm-device-plugin:policy/claim@0.1.3;
        }
    ",
    path: "../../wit",
    world: "wdp:host/imports",
    with: {
        "wasm-device-plugin:policy/types": crate::bindings::wit_types,
    },
});

/// Stands in for the generated `types` module: the hand-written types plus
/// the (empty) host trait and linker hook the generated world code expects.
pub mod wit_types {
    pub use crate::types::*;

    /// The `types` interface has no functions.
    #[allow(dead_code, reason = "named by the generated world code only")]
    pub trait Host {}
    impl<T: ?Sized> Host for T {}

    /// Mirrors the generated `HostWithStore` of an interface.
    pub trait HostWithStore<T>: wasmtime::component::HasData {}
    impl<H: ?Sized + wasmtime::component::HasData, T> HostWithStore<T> for H {}

    /// Defines the (empty) `types` instance so guests importing it link.
    pub fn add_to_linker<T, D>(
        linker: &mut wasmtime::component::Linker<T>,
        _host_getter: fn(&mut T) -> D::Data<'_>,
    ) -> wasmtime::Result<()>
    where
        D: HostWithStore<T>,
        T: 'static,
    {
        linker.instance("wasm-device-plugin:policy/types@0.1.3")?;
        Ok(())
    }
}
