//! Accepting the `:authority` the kubelet's plugin watcher sends.
//!
//! The plugin watcher dials a registration socket with
//! `grpc.DialContext(socketPath, …)` and no authority option, so grpc-go
//! sends the socket path as HTTP/2 `:authority`: percent-encoded by
//! grpc-go since 1.55 (`%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx.sock`),
//! verbatim before (`/var/lib/kubelet/plugins_registry/x.sock`). Neither is
//! a valid URI authority, and h2 (under tonic) answers such a request with
//! `RST_STREAM(PROTOCOL_ERROR)` before any service sees it.
//!
//! [`AuthorityFix`] sits between the socket and h2 and rewrites the bytes
//! the client sends: it decodes every header block (HPACK, keeping the
//! client's dynamic table), replaces an `:authority` that is not a valid
//! URI authority with `localhost` (what the kubelet itself sends when it
//! dials a device plugin), and encodes the block again with literal fields
//! only, so h2's own decoder table stays empty and in step. Every other
//! frame passes through untouched, streamed rather than buffered. A header
//! block that does not decode ends the connection, as h2 would.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::codegen::http::uri::Authority;
use tonic::transport::server::Connected;

/// What an invalid `:authority` becomes.
pub const REPLACEMENT_AUTHORITY: &str = "localhost";

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// h2's default `SETTINGS_MAX_FRAME_SIZE`, which the registration server
/// keeps: no client may send a larger frame.
const MAX_FRAME: usize = 16_384;
/// A header block larger than this is refused (registration requests carry
/// a few hundred bytes).
const MAX_HEADER_BLOCK: usize = 64 * 1024;
/// `SETTINGS_HEADER_TABLE_SIZE` h2 advertises by default: the most the
/// client's encoder may use.
const HEADER_TABLE_SIZE: usize = 4096;

/// A server-side connection whose client's invalid `:authority` values are
/// replaced before h2 reads them. Writes pass through unchanged.
pub struct AuthorityFix<S> {
    inner: S,
    /// Read from the socket, not yet handled.
    input: Vec<u8>,
    /// Handled, not yet handed to h2.
    output: Vec<u8>,
    out_pos: usize,
    state: State,
    /// Payload bytes of the current non-header frame still to copy.
    passthrough: usize,
    /// A HEADERS frame waiting for its CONTINUATION frames.
    pending: Option<Pending>,
    decoder: loona_hpack::Decoder<'static>,
    eof: bool,
}

impl<S> std::fmt::Debug for AuthorityFix<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorityFix").finish_non_exhaustive()
    }
}

enum State {
    Preface,
    Frames,
    /// Not HTTP/2 with prior knowledge: hand everything over and let h2 say so.
    Verbatim,
}

struct Pending {
    stream: u32,
    flags: u8,
    priority: Option<[u8; 5]>,
    block: Vec<u8>,
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl<S> AuthorityFix<S> {
    /// Wraps an accepted connection.
    pub fn new(inner: S) -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        Self {
            inner,
            input: Vec::new(),
            output: Vec::new(),
            out_pos: 0,
            state: State::Preface,
            passthrough: 0,
            pending: None,
            decoder,
            eof: false,
        }
    }

    /// Moves everything that can be handled from `input` to `output`.
    fn process(&mut self) -> io::Result<()> {
        loop {
            match self.state {
                State::Verbatim => {
                    self.output.append(&mut self.input);
                    return Ok(());
                }
                State::Preface => {
                    let n = self.input.len().min(PREFACE.len());
                    if self.input[..n] != PREFACE[..n] {
                        self.state = State::Verbatim;
                        continue;
                    }
                    if n < PREFACE.len() {
                        return Ok(());
                    }
                    self.output.extend(self.input.drain(..PREFACE.len()));
                    self.state = State::Frames;
                }
                State::Frames => {
                    if self.passthrough > 0 {
                        let n = self.passthrough.min(self.input.len());
                        self.output.extend(self.input.drain(..n));
                        self.passthrough -= n;
                        if self.passthrough > 0 {
                            return Ok(());
                        }
                    }
                    if self.input.len() < FRAME_HEADER {
                        return Ok(());
                    }
                    let head = &self.input[..FRAME_HEADER];
                    let len = (usize::from(head[0]) << 16)
                        | (usize::from(head[1]) << 8)
                        | usize::from(head[2]);
                    let kind = head[3];
                    let flags = head[4];
                    let stream =
                        u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                    if kind != HEADERS && kind != CONTINUATION {
                        if self.pending.is_some() {
                            return Err(invalid("a header block was interrupted by another frame"));
                        }
                        self.output.extend(self.input.drain(..FRAME_HEADER));
                        self.passthrough = len;
                        continue;
                    }
                    if len > MAX_FRAME {
                        return Err(invalid(format!("header frame of {len} bytes")));
                    }
                    if self.input.len() < FRAME_HEADER + len {
                        return Ok(());
                    }
                    let frame: Vec<u8> = self.input.drain(..FRAME_HEADER + len).collect();
                    self.header_frame(kind, flags, stream, &frame[FRAME_HEADER..])?;
                }
            }
        }
    }

    fn header_frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> io::Result<()> {
        if kind == HEADERS {
            if self.pending.is_some() {
                return Err(invalid("HEADERS inside a header block"));
            }
            let mut rest = payload;
            let mut pad = 0;
            if flags & PADDED != 0 {
                let (&n, tail) = rest
                    .split_first()
                    .ok_or_else(|| invalid("empty padded HEADERS"))?;
                pad = usize::from(n);
                rest = tail;
            }
            let mut priority = None;
            if flags & PRIORITY != 0 {
                if rest.len() < 5 {
                    return Err(invalid("short HEADERS priority"));
                }
                let mut p = [0; 5];
                p.copy_from_slice(&rest[..5]);
                priority = Some(p);
                rest = &rest[5..];
            }
            if pad > rest.len() {
                return Err(invalid("HEADERS padding longer than the frame"));
            }
            self.pending = Some(Pending {
                stream,
                flags,
                priority,
                block: rest[..rest.len() - pad].to_vec(),
            });
        } else {
            let pending = self
                .pending
                .as_mut()
                .filter(|p| p.stream == stream)
                .ok_or_else(|| invalid("CONTINUATION without its HEADERS"))?;
            pending.block.extend_from_slice(payload);
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.block.len() > MAX_HEADER_BLOCK)
        {
            return Err(invalid("header block too large"));
        }
        if flags & END_HEADERS != 0
            && let Some(pending) = self.pending.take()
        {
            self.emit(pending)?;
        }
        Ok(())
    }

    /// Decodes a complete header block and writes it out again.
    fn emit(&mut self, pending: Pending) -> io::Result<()> {
        let fields = self
            .decoder
            .decode(&pending.block)
            .map_err(|error| invalid(format!("header block does not decode: {error:?}")))?;
        let mut block = Vec::with_capacity(pending.block.len() + 64);
        for (name, value) in &fields {
            let value: &[u8] = if name == b":authority" && Authority::try_from(&value[..]).is_err()
            {
                tracing::debug!(
                    authority = %String::from_utf8_lossy(value),
                    "the client sent a socket path as :authority; reading it as {REPLACEMENT_AUTHORITY}"
                );
                REPLACEMENT_AUTHORITY.as_bytes()
            } else {
                value
            };
            // Literal header field without indexing, new name (RFC 7541 6.2.2).
            block.push(0);
            put_string(&mut block, name);
            put_string(&mut block, value);
        }
        let priority = pending.priority.as_ref().map_or(&[][..], |p| &p[..]);
        let first = (MAX_FRAME - priority.len()).min(block.len());
        let (head, mut rest) = block.split_at(first);
        let mut flags = pending.flags & (END_STREAM | PRIORITY);
        if rest.is_empty() {
            flags |= END_HEADERS;
        }
        put_frame_header(
            &mut self.output,
            priority.len() + head.len(),
            HEADERS,
            flags,
            pending.stream,
        );
        self.output.extend_from_slice(priority);
        self.output.extend_from_slice(head);
        while !rest.is_empty() {
            let n = rest.len().min(MAX_FRAME);
            let flags = if n == rest.len() { END_HEADERS } else { 0 };
            put_frame_header(&mut self.output, n, CONTINUATION, flags, pending.stream);
            self.output.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        Ok(())
    }
}

fn put_frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// An HPACK integer with a 7-bit prefix (RFC 7541 5.1), high bit clear.
fn put_int7(out: &mut Vec<u8>, mut value: usize) {
    const MAX: usize = 0x7f;
    if value < MAX {
        out.push(value as u8);
        return;
    }
    out.push(MAX as u8);
    value -= MAX;
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// An HPACK string literal without Huffman coding (RFC 7541 5.2).
fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_int7(out, bytes.len());
    out.extend_from_slice(bytes);
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.output.len() {
                let n = buf.remaining().min(this.output.len() - this.out_pos);
                buf.put_slice(&this.output[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.output.len() {
                    this.output.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // A truncated frame at the end goes to h2 as it came.
                if this.input.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.output.append(&mut this.input);
                continue;
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                this.eof = true;
                continue;
            }
            this.input.extend_from_slice(read.filled());
            this.process()?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for AuthorityFix<UnixStream> {
    type ConnectInfo = <UnixStream as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
#[path = "authority_tests.rs"]
mod tests;
