//! The connections a gRPC server accepts, bounded: at most `limits.max_connections` open at once
//! (one more is closed as it is accepted, counted as shed) and a connection that sends nothing
//! within `limits.header_read_timeout_ms` is closed before it takes a place in the server. Once
//! it has spoken, the server's HTTP/2 pings close it if its peer stops answering (an open,
//! answering but idle connection keeps its place until it closes). The listener is released when
//! the server stops.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// An accepted connection holding one of the listener's places until it closes.
pub struct BoundedConnection {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
}

impl Connected for BoundedConnection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for BoundedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for BoundedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The connections of `listener` for `Server::serve_with_incoming*`: at most `max_connections`
/// open, each having sent a first byte within `first_byte`. `api` labels the shed counter.
pub fn bounded(
    listener: TcpListener,
    max_connections: usize,
    first_byte: Duration,
    api: &'static str,
) -> ReceiverStream<io::Result<BoundedConnection>> {
    let places = Arc::new(Semaphore::new(max_connections.max(1)));
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                // The server stopped: release the listener.
                () = tx.closed() => break,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %err, api, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(place) = places.clone().try_acquire_owned() else {
                metrics::counter!(agentsearch_common::metrics::SHED, "api" => api).increment(1);
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut first = [0u8; 1];
                match tokio::time::timeout(first_byte, stream.peek(&mut first)).await {
                    Ok(Ok(n)) if n > 0 => {
                        let _ = tx
                            .send(Ok(BoundedConnection {
                                stream,
                                _place: place,
                            }))
                            .await;
                    }
                    // Silent past the timeout, or closed: the place is freed.
                    _ => {}
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
