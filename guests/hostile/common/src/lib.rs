//! The shape the call-time hostile guests (`hostile-infinite-loop`,
//! `hostile-memory-bomb`, `hostile-trap`, `hostile-sleeper`) share, written
//! once: [`misbehaving_guest!`].
//!
//! Such a guest exports every hook, and each one misbehaves the same way,
//! so the host can be tested hook by hook — but only when given work
//! (non-empty input, or a non-zero size): with empty input every hook
//! answers politely, so the guest passes a smoke test, goes into service,
//! and misbehaves under load.

#![no_std]

/// Defines and exports a guest whose five hooks answer politely on empty
/// input and otherwise call `$misbehave(hook)` (a `fn(&str) -> !` of the
/// guest crate, given the hook's WIT name). The guest crate depends on
/// `wdp-guest-sdk`, whose traits and export macros the expansion names.
#[macro_export]
macro_rules! misbehaving_guest {
    ($misbehave:path) => {
        struct Hostile;

        impl ::wdp_guest_sdk::Discovery for Hostile {
            fn discover(
                candidates: ::std::vec::Vec<::wdp_guest_sdk::Candidate>,
            ) -> ::core::result::Result<::std::vec::Vec<::wdp_guest_sdk::Device>, ::std::string::String>
            {
                if candidates.is_empty() {
                    return Ok(::std::vec::Vec::new());
                }
                $misbehave("discovery")
            }
        }

        impl ::wdp_guest_sdk::Health for Hostile {
            fn check(
                devices: ::std::vec::Vec<::wdp_guest_sdk::DeviceFacts>,
            ) -> ::core::result::Result<::std::vec::Vec<::wdp_guest_sdk::Verdict>, ::std::string::String>
            {
                if devices.is_empty() {
                    return Ok(::std::vec::Vec::new());
                }
                $misbehave("health")
            }
        }

        impl ::wdp_guest_sdk::PreferredAllocation for Hostile {
            fn choose(
                request: ::wdp_guest_sdk::PreferredRequest,
            ) -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
            {
                if request.size == 0 && request.available.is_empty() {
                    return Ok(::std::vec::Vec::new());
                }
                $misbehave("preferred-allocation")
            }
        }

        impl ::wdp_guest_sdk::Allocate for Hostile {
            fn allocate(
                devices: ::std::vec::Vec<::wdp_guest_sdk::DeviceRef>,
                default: ::wdp_guest_sdk::ContainerResponse,
            ) -> ::core::result::Result<::wdp_guest_sdk::ContainerResponse, ::std::string::String>
            {
                if devices.is_empty() {
                    return Ok(default);
                }
                $misbehave("allocate")
            }
        }

        impl ::wdp_guest_sdk::PreStart for Hostile {
            fn pre_start(
                devices: ::std::vec::Vec<::wdp_guest_sdk::DeviceRef>,
            ) -> ::core::result::Result<(), ::std::string::String> {
                if devices.is_empty() {
                    return Ok(());
                }
                $misbehave("pre-start")
            }
        }

        ::wdp_guest_sdk::export_discovery!(Hostile);
        ::wdp_guest_sdk::export_health!(Hostile);
        ::wdp_guest_sdk::export_preferred_allocation!(Hostile);
        ::wdp_guest_sdk::export_allocate!(Hostile);
        ::wdp_guest_sdk::export_pre_start!(Hostile);
    };
}
