//! The bounds every size the host computes is checked against before
//! anything is allocated, and where each comes from.

/// The kubelet's default gRPC receive limit: a `ListAndWatch`,
/// `GetPreferredAllocation` or `Allocate` message above it breaks the node.
pub const KUBELET_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The fewest bytes one advertised device adds to a `ListAndWatch`
/// message: a one-byte ID, the `Healthy` string and the protobuf framing
/// of the `Device` entry (tags and lengths), rounded up.
pub const MIN_DEVICE_MESSAGE_BYTES: usize = 16;

/// The most devices (base devices × replicas) one resource may advertise:
/// any more cannot fit the kubelet's message limit whatever their IDs, so
/// such a count is refused before a single device is built. 262,144.
pub const MAX_DEVICES_PER_RESOURCE: usize = KUBELET_MAX_MESSAGE_BYTES / MIN_DEVICE_MESSAGE_BYTES;

/// The largest config file (`host.toml` or a resource file) read.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1024 * 1024;

/// The most bytes a Unix socket path may have on Linux: `sun_path` holds
/// 108 bytes and the last must be the terminating NUL. A resource's socket
/// name joined with the device-plugin directory must fit, and a socket name
/// longer than this can never fit whatever the directory.
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Longest device ID the kubelet accepts.
pub const MAX_DEVICE_ID_LEN: usize = 63;
