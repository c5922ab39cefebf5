//! A plugin's registration socket for the tests: answers
//! `pluginregistration.Registration` (`GetInfo`, `NotifyRegistrationStatus`)
//! over HTTP/2 written by hand.
//!
//! The kubelet (and so the simulated kubelet) sends the socket path as
//! `:authority`, which h2 under tonic refuses with `RST_STREAM` (the host
//! works around it with its `AuthorityFix`). This responder reads only
//! `:path` and the request body, so any authority goes. It handles what a
//! kubelet-style client sends: the preface, `SETTINGS`, and per call one
//! `HEADERS` block and `DATA` until `END_STREAM`.

use std::path::{Path, PathBuf};

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::pluginregistration::{
    PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// A served registration socket; dropping it stops serving (the socket
/// file stays, as a crashed plugin's would).
pub struct RegistrationSocket {
    pub path: PathBuf,
    /// Every `NotifyRegistrationStatus` received, in order.
    pub statuses: watch::Receiver<Vec<RegistrationStatus>>,
    stop: CancellationToken,
}

impl Drop for RegistrationSocket {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RegistrationSocket {
    /// Binds `path` (replacing a stale file) and answers with `info`.
    pub fn serve(path: &Path, info: PluginInfo) -> Self {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).expect("bind the registration socket");
        let (tx, statuses) = watch::channel(Vec::new());
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { return };
                let (info, tx, token) = (info.clone(), tx.clone(), token.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = answer(stream, info, tx) => {}
                    }
                });
            }
        });
        Self {
            path: path.to_owned(),
            statuses,
            stop,
        }
    }

    /// Waits for status number `index` (from 0), bounded by `limit`.
    pub async fn status(&mut self, index: usize, limit: std::time::Duration) -> RegistrationStatus {
        let wait = self.statuses.wait_for(|s| s.len() > index);
        let statuses = tokio::time::timeout(limit, wait)
            .await
            .expect("a NotifyRegistrationStatus in time")
            .expect("the registration socket is served");
        statuses[index].clone()
    }
}

struct Call {
    path: String,
    body: Vec<u8>,
}

async fn read_frame(stream: &mut UnixStream) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await?;
    Ok((head[3], head[4], id, payload))
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, id: u32, payload: &[u8]) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A header block of literal fields without indexing (RFC 7541 6.2.2);
/// every name and value here is shorter than 127 bytes.
fn literal_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

async fn answer(
    mut stream: UnixStream,
    info: PluginInfo,
    statuses: watch::Sender<Vec<RegistrationStatus>>,
) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    stream.read_exact(&mut preface).await?;
    let mut hello = Vec::new();
    frame(&mut hello, SETTINGS, 0, 0, &[]);
    stream.write_all(&hello).await?;
    let mut decoder = loona_hpack::Decoder::new();
    let mut calls = std::collections::HashMap::<u32, Call>::new();
    loop {
        let (kind, flags, id, payload) = read_frame(&mut stream).await?;
        match kind {
            SETTINGS if flags & ACK == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                stream.write_all(&ack).await?;
            }
            HEADERS => {
                let fields = decoder
                    .decode(&payload)
                    .map_err(|e| std::io::Error::other(format!("HPACK: {e:?}")))?;
                let path = fields
                    .iter()
                    .find(|(n, _)| n == b":path")
                    .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default();
                calls.insert(
                    id,
                    Call {
                        path,
                        body: Vec::new(),
                    },
                );
            }
            DATA => {
                if let Some(call) = calls.get_mut(&id) {
                    call.body.extend_from_slice(&payload);
                }
                if flags & END_STREAM != 0
                    && let Some(call) = calls.remove(&id)
                {
                    let reply = respond(&call, &info, &statuses);
                    stream.write_all(&reply_frames(id, reply)).await?;
                }
            }
            _ => {}
        }
    }
}

/// The answer to one call: a protobuf body, or a gRPC status code.
fn respond(
    call: &Call,
    info: &PluginInfo,
    statuses: &watch::Sender<Vec<RegistrationStatus>>,
) -> Result<Vec<u8>, &'static str> {
    let message = call.body.get(5..).unwrap_or_default();
    match call.path.as_str() {
        "/pluginregistration.Registration/GetInfo" => Ok(info.encode_to_vec()),
        "/pluginregistration.Registration/NotifyRegistrationStatus" => {
            let status = RegistrationStatus::decode(message).map_err(|_| "3")?;
            statuses.send_modify(|s| s.push(status));
            Ok(RegistrationStatusResponse {}.encode_to_vec())
        }
        _ => Err("12"),
    }
}

fn reply_frames(id: u32, reply: Result<Vec<u8>, &'static str>) -> Vec<u8> {
    let mut out = Vec::new();
    let head = literal_block(&[(":status", "200"), ("content-type", "application/grpc")]);
    match reply {
        Ok(body) => {
            frame(&mut out, HEADERS, END_HEADERS, id, &head);
            let mut message = vec![0];
            message.extend_from_slice(&(body.len() as u32).to_be_bytes());
            message.extend_from_slice(&body);
            frame(&mut out, DATA, 0, id, &message);
            let trailers = literal_block(&[("grpc-status", "0")]);
            frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &trailers);
        }
        Err(code) => {
            let only = literal_block(&[
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", code),
            ]);
            frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &only);
        }
    }
    out
}
