//! The facts selectors ask of a PCI function, and their lazy reader used
//! during a scan (a selector that rejects a function by vendor costs one
//! file read).

use std::os::fd::BorrowedFd;
use std::path::Path;

use super::PciScan;

/// The identifying facts of a function, as selectors ask for them. During a
/// scan they are read on first use, so a selector that rejects a function
/// by vendor costs one file read.
pub(crate) trait PciFacts {
    /// `0000:3b:00.0`.
    fn address(&self) -> &str;
    /// Vendor ID (always known: a function without one is skipped).
    fn vendor(&self) -> u32;
    /// Device ID.
    fn device(&mut self) -> Option<u32>;
    /// 24-bit class code.
    fn class(&mut self) -> Option<u32>;
    /// Subsystem vendor ID.
    fn subsystem_vendor(&mut self) -> Option<u32>;
    /// Subsystem device ID.
    fn subsystem_device(&mut self) -> Option<u32>;
    /// Bound driver's name.
    fn driver(&mut self) -> Option<&str>;
}

/// [`PciFacts`] of a function being scanned, read lazily.
pub(super) struct LazyFacts<'s, 'r> {
    pub(super) scan: &'s mut PciScan<'r>,
    /// The function's directory, open.
    pub(super) fd: BorrowedFd<'s>,
    /// Host path of the function's directory.
    pub(super) host: &'s Path,
    pub(super) address: &'s str,
    pub(super) vendor: u32,
    pub(super) device: Option<Option<u32>>,
    pub(super) class: Option<Option<u32>>,
    pub(super) subsystem_vendor: Option<Option<u32>>,
    pub(super) subsystem_device: Option<Option<u32>>,
    pub(super) driver: Option<Option<String>>,
}

impl PciFacts for LazyFacts<'_, '_> {
    fn address(&self) -> &str {
        self.address
    }
    fn vendor(&self) -> u32 {
        self.vendor
    }
    fn device(&mut self) -> Option<u32> {
        *self
            .device
            .get_or_insert_with(|| self.scan.hex_file(self.fd, self.host, "device", true))
    }
    fn class(&mut self) -> Option<u32> {
        *self
            .class
            .get_or_insert_with(|| self.scan.hex_file(self.fd, self.host, "class", true))
    }
    fn subsystem_vendor(&mut self) -> Option<u32> {
        *self.subsystem_vendor.get_or_insert_with(|| {
            self.scan
                .hex_file(self.fd, self.host, "subsystem_vendor", false)
        })
    }
    fn subsystem_device(&mut self) -> Option<u32> {
        *self.subsystem_device.get_or_insert_with(|| {
            self.scan
                .hex_file(self.fd, self.host, "subsystem_device", false)
        })
    }
    fn driver(&mut self) -> Option<&str> {
        self.driver
            .get_or_insert_with(|| self.scan.driver_name(self.fd, self.host))
            .as_deref()
    }
}
