//! A gRPC unary client that dials a plugins-registry socket the way the
//! kubelet's plugin watcher does: grpc-go's `DialContext(socketPath)` with
//! no authority option, which sends the socket path, percent-encoded, as
//! HTTP/2 `:authority`. No Rust HTTP/2 client can send such an authority
//! (the `http` crate refuses it), so this one writes the frames itself:
//! the connection preface, `SETTINGS`, and per call a `HEADERS` block and
//! one `DATA` frame, HPACK-encoded as grpc-go does it (every field added to
//! the dynamic table on first use, referenced by index afterwards).

use std::path::Path;
use std::time::Duration;

use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The socket could not be reached or the connection broke.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The server reset the stream (h2 does this with `PROTOCOL_ERROR` for
    /// an `:authority` it cannot parse).
    #[error("stream reset by the server with HTTP/2 error code {0}")]
    Reset(u32),
    /// The server closed the connection.
    #[error("connection closed by the server (GOAWAY code {0})")]
    GoAway(u32),
    /// The call ended with a gRPC status other than OK.
    #[error("gRPC status {code}: {message}")]
    Status {
        /// The `grpc-status` code.
        code: String,
        /// The `grpc-message`.
        message: String,
    },
    /// The answer was not a well-formed gRPC response.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// The `:authority` grpc-go sends for a dial target that is a socket path:
/// the path with every byte outside RFC 3986's authority characters
/// percent-encoded (`/` becomes `%2F`).
pub fn grpc_go_authority(socket: &Path) -> String {
    let mut out = String::new();
    for &b in socket.as_os_str().as_encoded_bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]@".contains(&b);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One HTTP/2 connection to a plugin's registration socket.
pub struct KubeletStyleConn {
    stream: UnixStream,
    authority: String,
    next_stream: u32,
    /// Our encoder's dynamic table, newest first.
    table: Vec<(String, String)>,
    decoder: loona_hpack::Decoder<'static>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for KubeletStyleConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletStyleConn")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl KubeletStyleConn {
    /// Dials `socket` and sends the connection preface, with the
    /// `:authority` the kubelet would send for it.
    pub async fn connect(socket: &Path) -> Result<Self, DialError> {
        Self::connect_with_authority(socket, grpc_go_authority(socket)).await
    }

    /// Dials `socket`, sending `authority` as `:authority` on every call.
    pub async fn connect_with_authority(
        socket: &Path,
        authority: String,
    ) -> Result<Self, DialError> {
        let mut stream = UnixStream::connect(socket).await?;
        let mut hello = PREFACE.to_vec();
        put_frame(&mut hello, SETTINGS, 0, 0, &[]);
        stream.write_all(&hello).await?;
        Ok(Self {
            stream,
            authority,
            next_stream: 1,
            table: Vec::new(),
            decoder: loona_hpack::Decoder::new(),
            buf: Vec::new(),
        })
    }

    /// Calls the unary method `path` (`/package.Service/Method`) with
    /// `request` and decodes the answer, within `limit`.
    pub async fn unary<Req: Message, Resp: Message + Default>(
        &mut self,
        path: &str,
        request: &Req,
        limit: Duration,
    ) -> Result<Resp, DialError> {
        tokio::time::timeout(limit, self.call(path, request))
            .await
            .map_err(|_| DialError::Timeout(limit))?
    }

    async fn call<Req: Message, Resp: Message + Default>(
        &mut self,
        path: &str,
        request: &Req,
    ) -> Result<Resp, DialError> {
        let id = self.next_stream;
        self.next_stream += 2;
        // grpc-go sends the time left as grpc-timeout, a new value (and so
        // a new dynamic-table entry) on nearly every call.
        let timeout = format!("{}u", 999_999 - id);
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", &self.authority.clone()),
            ("content-type", "application/grpc"),
            ("user-agent", "grpc-go/1.72.0"),
            ("te", "trailers"),
            ("grpc-timeout", &timeout),
        ];
        let mut block = Vec::new();
        for (name, value) in fields {
            self.encode(&mut block, name, value);
        }
        let body = request.encode_to_vec();
        let mut message = vec![0];
        message.extend_from_slice(&(body.len() as u32).to_be_bytes());
        message.extend_from_slice(&body);
        let mut out = Vec::new();
        put_frame(&mut out, HEADERS, END_HEADERS, id, &block);
        put_frame(&mut out, DATA, END_STREAM, id, &message);
        self.stream.write_all(&out).await?;

        let mut data = Vec::new();
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut block: Option<Vec<u8>> = None;
        loop {
            let frame = self.read_frame().await?;
            match frame.kind {
                SETTINGS if frame.flags & ACK == 0 => {
                    let mut ack = Vec::new();
                    put_frame(&mut ack, SETTINGS, ACK, 0, &[]);
                    self.stream.write_all(&ack).await?;
                }
                PING if frame.flags & ACK == 0 => {
                    let mut pong = Vec::new();
                    put_frame(&mut pong, PING, ACK, 0, &frame.payload);
                    self.stream.write_all(&pong).await?;
                }
                GOAWAY => {
                    let code = frame.payload.get(4..8).map_or(0, be32);
                    return Err(DialError::GoAway(code));
                }
                RST_STREAM if frame.stream == id => {
                    return Err(DialError::Reset(be32(&frame.payload)));
                }
                HEADERS | CONTINUATION if frame.stream == id => {
                    let fragment = if frame.kind == HEADERS {
                        strip_headers(&frame)?
                    } else {
                        &frame.payload[..]
                    };
                    block
                        .get_or_insert_with(Vec::new)
                        .extend_from_slice(fragment);
                    if frame.flags & END_HEADERS != 0 {
                        let raw = block.take().unwrap_or_default();
                        let decoded = self
                            .decoder
                            .decode(&raw)
                            .map_err(|e| DialError::Malformed(format!("HPACK: {e:?}")))?;
                        headers.extend(decoded.into_iter().map(|(n, v)| {
                            (
                                String::from_utf8_lossy(&n).into_owned(),
                                String::from_utf8_lossy(&v).into_owned(),
                            )
                        }));
                    }
                    if frame.flags & END_STREAM != 0 {
                        break;
                    }
                }
                DATA if frame.stream == id => {
                    data.extend_from_slice(strip_padding(&frame)?);
                    if frame.flags & END_STREAM != 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        if get(":status").as_deref() != Some("200") {
            return Err(DialError::Malformed(format!(
                "HTTP status {:?}",
                get(":status")
            )));
        }
        let code = get("grpc-status").unwrap_or_default();
        if code != "0" {
            return Err(DialError::Status {
                code,
                message: get("grpc-message").unwrap_or_default(),
            });
        }
        if data.len() < 5 {
            return Err(DialError::Malformed("no message".into()));
        }
        let len = be32(&data[1..5]) as usize;
        let body = data
            .get(5..5 + len)
            .ok_or_else(|| DialError::Malformed("short message".into()))?;
        Resp::decode(body).map_err(|e| DialError::Malformed(e.to_string()))
    }

    /// grpc-go's encoder: an exact match in the dynamic table is sent by
    /// index, anything else as a literal added to the table (RFC 7541 6.2.1).
    fn encode(&mut self, out: &mut Vec<u8>, name: &str, value: &str) {
        if let Some(i) = self.table.iter().position(|(n, v)| n == name && v == value) {
            put_int(out, 0x80, 7, 62 + i);
            return;
        }
        out.push(0x40);
        put_int(out, 0, 7, name.len());
        out.extend_from_slice(name.as_bytes());
        put_int(out, 0, 7, value.len());
        out.extend_from_slice(value.as_bytes());
        self.table.insert(0, (name.to_owned(), value.to_owned()));
        // Evict the oldest entries beyond the default 4,096 bytes (RFC 7541 4.4).
        let size =
            |t: &[(String, String)]| t.iter().map(|(n, v)| n.len() + v.len() + 32).sum::<usize>();
        while size(&self.table) > 4096 {
            self.table.pop();
        }
    }

    async fn read_frame(&mut self) -> Result<Frame, DialError> {
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let raw: Vec<u8> = self.buf.drain(..9 + len).collect();
                    return Ok(Frame {
                        kind: raw[3],
                        flags: raw[4],
                        stream: be32(&raw[5..9]) & 0x7fff_ffff,
                        payload: raw[9..].to_vec(),
                    });
                }
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(DialError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn strip_padding(frame: &Frame) -> Result<&[u8], DialError> {
    if frame.flags & PADDED == 0 {
        return Ok(&frame.payload);
    }
    let pad = usize::from(*frame.payload.first().unwrap_or(&0));
    frame
        .payload
        .get(1..frame.payload.len().saturating_sub(pad))
        .ok_or_else(|| DialError::Malformed("bad padding".into()))
}

fn strip_headers(frame: &Frame) -> Result<&[u8], DialError> {
    let body = strip_padding(frame)?;
    if frame.flags & PRIORITY != 0 {
        return body
            .get(5..)
            .ok_or_else(|| DialError::Malformed("short priority".into()));
    }
    Ok(body)
}

fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// An HPACK integer (RFC 7541 5.1) with `bits` prefix bits under `high`.
fn put_int(out: &mut Vec<u8>, high: u8, bits: u8, mut value: usize) {
    let max = (1usize << bits) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
#[path = "kubelet_dial_tests.rs"]
mod tests;
