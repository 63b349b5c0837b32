//! What a client may hold of the server: how many connections at once, how
//! long a request's head may take to arrive, how long a connection may sit
//! idle, and how long shutdown waits for connections to finish. Shared by
//! the REST and gRPC listeners.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};

/// Limits on the clients' connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// `MESON_HTTP_HEADER_TIMEOUT_S`: an HTTP/1 request's head must have
    /// arrived this long after the connection started waiting for it (a new
    /// connection, or a kept-alive one after its previous answer).
    pub header_timeout: Duration,
    /// `MESON_HTTP_IDLE_TIMEOUT_S`: a connection on which no byte moves, in
    /// either direction, for this long is closed.
    pub idle_timeout: Duration,
    /// `MESON_MAX_CONNECTIONS`: connections open at once (REST, gRPC and the
    /// autoscalers' endpoint together); one more is closed at once.
    pub max_connections: usize,
    /// `MESON_HTTP_DRAIN_S`: on shutdown, connections still open this long
    /// after the listeners closed are cut.
    pub drain: Duration,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            drain: Duration::from_secs(10),
        }
    }
}

/// The connections of one process: the cap they share, and the signal that
/// cuts those still open when shutdown's drain is over.
#[derive(Clone, Debug)]
pub struct Connections {
    pub limits: ConnLimits,
    slots: Arc<Semaphore>,
    cut: watch::Receiver<bool>,
}

/// Cuts every connection of its [`Connections`] still open.
#[derive(Debug)]
pub struct Cutter(watch::Sender<bool>);

impl Cutter {
    pub fn cut(&self) {
        let _ = self.0.send(true);
    }
}

impl Connections {
    pub fn new(limits: ConnLimits) -> (Connections, Cutter) {
        let (tx, cut) = watch::channel(false);
        let slots = Arc::new(Semaphore::new(limits.max_connections));
        (Connections { limits, slots, cut }, Cutter(tx))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.limits.max_connections - self.slots.available_permits()
    }

    /// Waits for the next connection within the cap. One past the cap is
    /// answered `refusal` (best effort) and closed.
    pub async fn accept(
        &self,
        listener: &TcpListener,
        refusal: &[u8],
    ) -> io::Result<Guarded<TcpStream>> {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                // Out of file descriptors and the like: a pause, not an end.
                Err(e) if is_transient(&e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Ok(permit) = self.slots.clone().try_acquire_owned() else {
                refused(peer, self.limits.max_connections);
                if !refusal.is_empty() {
                    let _ = stream.try_write(refusal);
                }
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            return Ok(Guarded::new(
                stream,
                self.limits.idle_timeout,
                self.cut.clone(),
                permit,
            ));
        }
    }

    /// The accepted connections of `listener` as a stream (for tonic).
    pub fn incoming(
        self,
        listener: TcpListener,
    ) -> impl futures::Stream<Item = io::Result<Guarded<TcpStream>>> + Send + 'static {
        futures::stream::unfold((self, listener), |(conns, listener)| async move {
            let next = conns.accept(&listener, b"").await;
            Some((next, (conns, listener)))
        })
    }
}

fn is_transient(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected
    )
}

/// Logs a refused connection, at most once a second.
fn refused(peer: std::net::SocketAddr, cap: usize) {
    use std::sync::Mutex;
    static LAST: Mutex<Option<std::time::Instant>> = Mutex::new(None);
    metrics::counter!("meson_connections_refused_total").increment(1);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
        *last = Some(std::time::Instant::now());
        tracing::warn!(%peer, cap, "connection refused: MESON_MAX_CONNECTIONS are open");
    }
}

/// The canned answer of an HTTP/1 connection past the cap.
pub const HTTP_REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Type: application/json\r\nContent-Length: 121\r\nConnection: close\r\n\r\n\
{\"error\":{\"code\":\"unavailable\",\"message\":\"too many connections are open: retry in a moment\",\"details\":{\"retry_after\":1}}}";

/// A connection holding its slot under the cap, closed when no byte moves
/// for the idle timeout or when shutdown cuts it.
pub struct Guarded<IO> {
    io: IO,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    cut: Pin<Box<dyn Future<Output = ()> + Send>>,
    was_cut: bool,
    _slot: OwnedSemaphorePermit,
}

impl<IO> Guarded<IO> {
    fn new(
        io: IO,
        idle: Duration,
        mut cut: watch::Receiver<bool>,
        slot: OwnedSemaphorePermit,
    ) -> Guarded<IO> {
        Guarded {
            io,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            cut: Box::pin(async move {
                // A Cutter dropped unused cuts nothing.
                if cut.wait_for(|c| *c).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }),
            was_cut: false,
            _slot: slot,
        }
    }

    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// An error once the connection was cut or sat idle too long; else
    /// arms the wake-ups for both.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.was_cut || self.cut.as_mut().poll(cx).is_ready() {
            self.was_cut = true;
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server is shutting down",
            ));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection was idle too long",
            ));
        }
        Ok(())
    }

    fn moved(&mut self) {
        let at = Instant::now() + self.idle;
        // Resetting the timer on every read costs; a second's slack is fine.
        if at > self.deadline.deadline() + Duration::from_secs(1) {
            self.deadline.as_mut().reset(at);
        }
    }

    fn after<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(Ok(v)) => {
                self.moved();
                Poll::Ready(Ok(v))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                self.check(cx)?;
                Poll::Pending
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.after(cx, r)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after(cx, r)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.after(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Guarded<TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Serves HTTP (1.1 and h2c) on `listener` with `service` until `stop`,
/// within `conns`' limits. On `stop` the listener closes and connections
/// finish their requests; those left are cut by the [`Cutter`].
pub async fn serve_http<S>(
    listener: TcpListener,
    service: S,
    conns: Connections,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()>
where
    S: tower::Service<
            axum::http::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(conns.limits.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            s = conns.accept(&listener, HTTP_REFUSAL) => s?,
            _ = stop.wait_for(|s| *s) => break,
        };
        let io = TokioIo::new(stream);
        let svc = hyper_util::service::TowerToHyperService::new(service.clone());
        // Upgrades: a console's WebSocket.
        let conn = builder.serve_connection_with_upgrades(io, svc);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    // Each connection finishes its request; the Cutter ends the stragglers.
    graceful.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_refusal_is_one_whole_http_answer_with_the_error_envelope() {
        let text = std::str::from_utf8(super::HTTP_REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "unavailable");
        assert_eq!(v["error"]["details"]["retry_after"], 1);
    }
}
