//! A connection's write deadline: a write that makes no progress for the
//! configured time fails, and the connection with it.
//!
//! A client that sends requests and never reads the answers (pipelining
//! forty large responses, say) would otherwise hold its connection, and the
//! connection slot, forever: once the socket's send buffer is full, hyper
//! waits for the socket to become writable with no deadline of its own. The
//! clock runs only while a write is blocked and restarts at each step of
//! progress, as nginx's `send_timeout` does, so a large answer to a slow
//! but reading client is never cut; the connection's lifetime bounds the
//! rest.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner` whose blocked writes fail after `limit`.
pub struct WriteDeadline<T> {
    inner: T,
    limit: Duration,
    /// Armed while a write is blocked; kept (not reallocated) between stalls.
    stall: Pin<Box<Sleep>>,
    armed: bool,
}

impl<T> WriteDeadline<T> {
    pub fn new(inner: T, limit: Duration) -> Self {
        WriteDeadline {
            inner,
            limit,
            stall: Box::pin(tokio::time::sleep(limit)),
            armed: false,
        }
    }

    /// Passes a write's outcome through; a blocked write starts (or keeps
    /// running) the clock, and fails once it runs out.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match outcome {
            Poll::Ready(result) => {
                self.armed = false;
                Poll::Ready(result)
            }
            Poll::Pending => {
                if !self.armed {
                    self.armed = true;
                    self.stall.as_mut().reset(Instant::now() + self.limit);
                }
                ready!(self.stall.as_mut().poll(cx));
                tracing::debug!(
                    limit_ms = self.limit.as_millis() as u64,
                    "the client stopped reading; closing the connection"
                );
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client read nothing within the write deadline",
                )))
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, outcome)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_nobody_reads_fails_at_the_deadline_and_one_that_is_read_does_not() {
        // A pipe with a small buffer stands in for a socket whose peer stopped reading.
        let (near, mut far) = tokio::io::duplex(1024);
        let mut guarded = WriteDeadline::new(near, Duration::from_millis(200));
        let started = std::time::Instant::now();
        let err = guarded.write_all(&[7u8; 64 * 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(200));

        // A reader that keeps reading, slower than the whole write but faster
        // than the deadline between steps, is never cut off.
        let (near, far_reader) = tokio::io::duplex(1024);
        let mut guarded = WriteDeadline::new(near, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut far_reader = far_reader;
            let mut total = 0;
            let mut chunk = [0u8; 1024];
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                match far_reader.read(&mut chunk).await.unwrap() {
                    0 => return total,
                    n => total += n,
                }
            }
        });
        guarded.write_all(&[7u8; 16 * 1024]).await.unwrap();
        guarded.shutdown().await.unwrap();
        drop(guarded);
        assert_eq!(reader.await.unwrap(), 16 * 1024);
        drop(far.shutdown().await);
    }
}
