//! Dialling a gRPC peer over a Unix socket, as both the kubelet and device
//! plugins do. The only hand-written logic in this crate besides constants.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// Connects a tonic [`Channel`] to the Unix socket at `path`.
///
/// The URI is a placeholder that tonic requires; every connection goes to
/// `path`. The channel reconnects on demand, so it survives a peer restart.
pub async fn connect_unix(path: impl Into<PathBuf>) -> Result<Channel, tonic::transport::Error> {
    let path = path.into();
    Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
}

/// The `:authority` grpc-go sends for a `unix:` target.
pub const UNIX_TARGET_AUTHORITY: &str = "localhost";

/// A tonic [`Channel`] to the Unix socket at `path` made the way grpc-go's
/// `grpc.NewClient("unix:" + path)` makes one, which is how the kubelet
/// dials a DRA driver: `:authority` is [`UNIX_TARGET_AUTHORITY`], nothing
/// is dialled until the first call, and the channel dials again after the
/// peer went away.
pub fn connect_unix_target(path: impl Into<PathBuf>) -> Channel {
    let path = path.into();
    Endpoint::from_static("http://localhost").connect_with_connector_lazy(tower::service_fn(
        move |_| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        },
    ))
}
