//! A minimal HTTP/1.1 endpoint for Prometheus scrapes and probes: `GET /metrics` (text
//! format), `GET /live` (the process answers) and `GET /ready` (models loaded and admitting).
//! Scrapers send one small GET per connection, so a hand-written responder is enough and keeps
//! a web framework out of the binary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Serves until `stop` is cancelled.
pub async fn serve(listener: TcpListener, state: Arc<AppState>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let state = state.clone();
                tokio::spawn(async move {
                    if let Err(e) = answer(stream, &state).await {
                        tracing::debug!(%peer, error = %e, "metrics connection failed");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics accept failed");
                // Accept errors (EMFILE) are usually transient; back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Binds the metrics port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

async fn answer(mut stream: TcpStream, state: &AppState) -> std::io::Result<()> {
    // A request line and a few headers fit easily; anything longer is not a scrape.
    let mut buf = vec![0u8; 4096];
    let mut filled = 0;
    let read = async {
        while !buf[..filled].windows(4).any(|w| w == b"\r\n\r\n") && filled < buf.len() {
            let n = stream.read(&mut buf[filled..]).await?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "slow request"))??;
    let head = String::from_utf8_lossy(&buf[..filled]);
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            state.render_metrics(),
        ),
        ("GET", "/live") => ("200 OK", "text/plain", "live\n".to_owned()),
        ("GET", "/ready") if state.is_ready() => ("200 OK", "text/plain", "ready\n".to_owned()),
        ("GET", "/ready") => (
            "503 Service Unavailable",
            "text/plain",
            "not ready\n".to_owned(),
        ),
        _ => ("404 Not Found", "text/plain", "not found\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
