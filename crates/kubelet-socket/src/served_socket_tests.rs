use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;

use super::{SocketServer, Unlink};

fn server(stop: &CancellationToken) -> (SocketServer, watch::Receiver<bool>) {
    let (registered, registered_rx) = watch::channel(true);
    let server = SocketServer::new(
        tracing::info_span!("test"),
        "socket",
        Arc::new(registered),
        stop.clone(),
    );
    (server, registered_rx)
}

#[tokio::test]
async fn a_served_socket_accepts_connections_and_notices_its_removal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.sock");
    let stop = CancellationToken::new();
    let (mut server, registered) = server(&stop);
    let served = server.serve(&path, |_| Routes::default()).await.unwrap();
    assert!(!*registered.borrow(), "registered is reset at each bind");
    UnixStream::connect(&path).expect("the socket listens once it is in place");
    assert!(served.is_ours());
    assert!(
        !dir.path().join(".gpu.sock.staging").exists(),
        "the staging name is gone"
    );

    std::fs::remove_file(&path).unwrap();
    tokio::time::timeout(Duration::from_secs(10), served.removed())
        .await
        .expect("the removal is noticed");
    assert!(!served.is_ours());
    served.close(Unlink::No).await;

    // Served again at the same path.
    let again = server.serve(&path, |_| Routes::default()).await.unwrap();
    UnixStream::connect(&path).unwrap();
    again.close(Unlink::IfOurs).await;
    assert!(!path.exists(), "closing unlinks the socket it owns");
}

#[tokio::test]
async fn closing_leaves_a_socket_that_replaced_ours() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dra.sock");
    let stop = CancellationToken::new();
    let (mut server, _) = server(&stop);
    let served = server.serve(&path, |_| Routes::default()).await.unwrap();
    std::fs::remove_file(&path).unwrap();
    let _other = std::os::unix::net::UnixListener::bind(&path).unwrap();
    served.close(Unlink::IfOurs).await;
    assert!(path.exists(), "another instance's socket stays");
}

#[tokio::test]
async fn a_socket_that_cannot_be_bound_is_tried_again_until_it_can() {
    let dir = tempfile::tempdir().unwrap();
    // The folder is a file at first: binding fails.
    let folder = dir.path().join("plugins");
    std::fs::write(&folder, "not a folder").unwrap();
    let path = folder.join("dra.sock");
    let stop = CancellationToken::new();
    let (mut server, mut registered) = server(&stop);
    let serving = tokio::spawn(async move { server.serve(&path, |_| Routes::default()).await });
    // Each attempt resets "registered" and then binds, in one poll of the
    // single-threaded runtime: once the reset is seen, the first attempt
    // has failed and the task waits out its backoff.
    registered.changed().await.unwrap();
    assert!(!serving.is_finished(), "still retrying");
    std::fs::remove_file(&folder).unwrap();
    let served = tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("bound once the folder can be made")
        .unwrap()
        .expect("not stopped");
    UnixStream::connect(served.path()).unwrap();
}

#[tokio::test]
async fn stopping_ends_the_retries() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("plugins");
    std::fs::write(&folder, "not a folder").unwrap();
    let path = folder.join("dra.sock");
    let stop = CancellationToken::new();
    let (mut server, _) = server(&stop);
    let serving = tokio::spawn(async move { server.serve(&path, |_| Routes::default()).await });
    stop.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("the retries end when stopped")
        .unwrap();
    assert!(outcome.is_none());
}

#[tokio::test]
async fn unlinking_before_exit_removes_the_socket_and_leaves_its_connections_to_the_exit() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.sock");
    let stop = CancellationToken::new();
    let (mut server, registered) = server(&stop);
    let served = server.serve(&path, |_| Routes::default()).await.unwrap();
    let mut kubelet = tokio::net::UnixStream::connect(&path).await.unwrap();
    served.registered.send_replace(true);

    served.unlink_before_exit();
    assert!(!path.exists(), "the socket is gone before the exit");
    assert!(!*registered.borrow(), "not registered afterwards");
    UnixStream::connect(&path).expect_err("nothing new connects");

    // The connection made before is still served: an HTTP/2 client's
    // preface is answered with the server's SETTINGS, not a GOAWAY or EOF.
    kubelet
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut header = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), kubelet.read_exact(&mut header))
        .await
        .expect("the server answers")
        .expect("the connection is still open");
    assert_eq!(
        header[3], 0x4,
        "a SETTINGS frame, got frame type {}",
        header[3]
    );
}
