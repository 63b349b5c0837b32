//! A daemon's listener that a host can take down (closed port, dropped connections) and bring back on the same port.

use crate::host::SimHost;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

/// Pause after an accept or bind failure, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Binds `addr` so that it can be bound again right after being closed.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Serves one daemon of `host` while the host is up. While it is down the
/// socket is closed, so connecting is refused as on a dead machine.
pub(crate) struct HostListener {
    host: SimHost,
    /// The daemon's bit in the host's listening mask.
    bit: u8,
    addr: SocketAddr,
    inner: Option<TcpListener>,
    down: watch::Receiver<bool>,
}

impl HostListener {
    pub(crate) fn new(host: SimHost, bit: u8, listener: TcpListener) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        host.set_listening(bit, true);
        Ok(HostListener {
            down: host.faults().down_watch(),
            host,
            bit,
            addr,
            inner: Some(listener),
        })
    }

    fn close(&mut self) {
        if self.inner.take().is_some() {
            self.host.set_listening(self.bit, false);
            tracing::info!(host = self.host.name(), addr = %self.addr, "listener closed: host down");
        }
    }
}

impl Drop for HostListener {
    fn drop(&mut self) {
        self.host.set_listening(self.bit, false);
    }
}

impl axum::serve::Listener for HostListener {
    type Io = HostStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (HostStream, SocketAddr) {
        let mut pause = FIRST_PAUSE;
        loop {
            if *self.down.borrow_and_update() {
                self.close();
                if self.down.wait_for(|down| !*down).await.is_err() {
                    // The host is gone; nothing will ever connect again.
                    std::future::pending::<()>().await;
                }
                continue;
            }
            let Some(listener) = &self.inner else {
                match bind(self.addr) {
                    Ok(l) => {
                        self.inner = Some(l);
                        self.host.set_listening(self.bit, true);
                        tracing::info!(host = self.host.name(), addr = %self.addr, "listener open again: host up");
                        pause = FIRST_PAUSE;
                    }
                    Err(e) => {
                        tracing::warn!(host = self.host.name(), addr = %self.addr, error = %e, "cannot listen again, retrying");
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            _ = self.down.changed() => {}
                        }
                        pause = (pause * 2).min(MAX_PAUSE);
                    }
                }
                continue;
            };
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let down = self.down.clone();
                        return (HostStream::new(stream, down), peer);
                    }
                    Err(e) if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) => {}
                    Err(e) => {
                        // E.g. out of file descriptors: wait for some to close.
                        tracing::error!(host = self.host.name(), error = %e, "accept failed");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(MAX_PAUSE);
                    }
                },
                _ = self.down.changed() => {}
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// A served connection that breaks as soon as its host goes down, so
/// pooled keep-alive connections and requests in flight fail too.
pub(crate) struct HostStream {
    inner: TcpStream,
    down: Pin<Box<dyn Future<Output = ()> + Send>>,
    dead: bool,
}

impl HostStream {
    fn new(inner: TcpStream, mut down: watch::Receiver<bool>) -> Self {
        HostStream {
            inner,
            down: Box::pin(async move {
                // An error means the host is gone: the connection dies too.
                let _ = down.wait_for(|d| *d).await;
            }),
            dead: false,
        }
    }

    /// Whether the host went down; registers for the wake-up otherwise.
    fn is_dead(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.dead && self.down.as_mut().poll(cx).is_ready() {
            self.dead = true;
        }
        self.dead
    }
}

fn host_down() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "host is down")
}

impl AsyncRead for HostStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.is_dead(cx) {
            return Poll::Ready(Err(host_down()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HostStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.is_dead(cx) {
            return Poll::Ready(Err(host_down()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.is_dead(cx) {
            return Poll::Ready(Err(host_down()));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
