//! Test support: one HTTP/1.1 request read off a raw socket, as a scripted upstream sees it.
//!
//! Why here: the transport's own tests and the attempt's tests (`upstream`) both stand up raw
//! servers on real sockets; this is the one reader they share.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A request as the server read it.
#[derive(Debug)]
pub(crate) struct Seen {
    /// Request line and headers, names lower-cased.
    pub head: String,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            (n == name).then(|| v.trim())
        })
    }
}

/// Reads one request (head, and a `content-length` body); `None` when the peer closed first.
pub(crate) async fn read_request(sock: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head: String = String::from_utf8_lossy(&buf[..head_end])
        .lines()
        .map(|line| match line.split_once(':') {
            Some((n, v)) => format!("{}:{v}\n", n.to_ascii_lowercase()),
            None => format!("{line}\n"),
        })
        .collect();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen { head, body })
}
