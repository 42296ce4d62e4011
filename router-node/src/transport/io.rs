//! An upstream connection's socket: plain TCP inline, TLS behind a box.
//!
//! Why a module: hyper-rustls's stream type holds a TLS session inline (about 1.1 KiB) even
//! for a plain connection, and hyper's connection task stores the socket by value, so every
//! plain upstream connection's task carried that space for as long as it lived: 1,752 bytes
//! against 680 with the plain socket alone. Idle long-lived streams hold one such task each.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What hyper-rustls's connector returns.
pub(super) type Connected = MaybeHttpsStream<TokioIo<TcpStream>>;

/// The socket hyper's connection task owns.
#[derive(Debug)]
pub(super) enum UpstreamIo {
    Plain(TokioIo<TcpStream>),
    Tls(Box<Connected>),
}

impl From<Connected> for UpstreamIo {
    fn from(io: Connected) -> Self {
        match io {
            MaybeHttpsStream::Http(plain) => Self::Plain(plain),
            tls => Self::Tls(Box::new(tls)),
        }
    }
}

impl Read for UpstreamIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(io) => io.is_write_vectored(),
            Self::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_flush(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use hyper::client::conn::http1::Connection;

    #[test]
    fn a_plain_connection_task_does_not_carry_a_tls_session() {
        let boxed = std::mem::size_of::<Connection<UpstreamIo, Full<bytes::Bytes>>>();
        let inline = std::mem::size_of::<Connection<Connected, Full<bytes::Bytes>>>();
        let plain = std::mem::size_of::<Connection<TokioIo<TcpStream>, Full<bytes::Bytes>>>();
        assert!(boxed < inline, "{boxed} >= {inline}");
        assert!(boxed <= plain + 16, "{boxed} > {plain} + 16");
    }
}
