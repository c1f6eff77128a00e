//! HTTP/1.1 read by hand off a raw socket, for the tests that hold
//! connections open, trickle bytes or watch `connection: close`.

use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Reads one HTTP/1.1 answer's head from `stream` (up to the blank line).
pub async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).to_lowercase())
}

/// Skips a `content-length` body.
pub async fn skip_body(stream: &mut TcpStream, head: &str) {
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
}
