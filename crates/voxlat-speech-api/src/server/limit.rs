//! A connection limit for the server: each accepted connection holds a permit until it
//! closes, and past the limit the listener stops accepting, so the kernel's backlog (and
//! then the client's connect) holds the rest instead of the server's memory.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A listener that serves at most `max` connections at once.
pub struct ConnectionLimited {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl ConnectionLimited {
    /// `max` is at least 1.
    pub fn new(inner: TcpListener, max: usize) -> ConnectionLimited {
        ConnectionLimited {
            inner,
            permits: Arc::new(Semaphore::new(max.max(1))),
        }
    }
}

/// A connection and its permit, returned when the connection is dropped.
pub struct Limited {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl axum::serve::Listener for ConnectionLimited {
    type Io = Limited;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Limited, std::net::SocketAddr) {
        // The semaphore is never closed, so this waits for a permit rather than failing.
        let permit = loop {
            if let Ok(p) = self.permits.clone().acquire_owned().await {
                break p;
            }
        };
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (
            Limited {
                io,
                _permit: permit,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
