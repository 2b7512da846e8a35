//! The `/metrics` endpoint: hyper's HTTP/1 server on a one-thread tokio runtime, on a
//! thread pinned to the housekeeping CPUs.
//!
//! hyper was chosen over tiny_http because tiny_http bounds neither a header's size nor
//! the time a client may take to send it (one thread per connection, held as long as the
//! client likes): a slow or malformed client could grow memory or threads without end.
//! Here every bound is explicit: at most [`MAX_CONNECTIONS`] open connections (more are
//! closed at once), request headers within [`MAX_BUF`] bytes (hyper answers 431 beyond)
//! and within [`HEADER_TIMEOUT`], and no connection lives longer than [`MAX_LIFETIME`]
//! (a client that never reads its answer). Everything runs on the one thread.

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::engine::cpu::CpuList;
use crate::engine::sched;

use super::metrics::Metrics;

/// Open connections at most; Prometheus needs one per scraper.
pub const MAX_CONNECTIONS: usize = 256;
/// A request's headers must arrive within this.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection's read buffer, and so the largest header block accepted.
pub const MAX_BUF: usize = 16 * 1024;
/// No connection is kept longer, keep-alive or not.
pub const MAX_LIFETIME: Duration = Duration::from_secs(120);

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot start the HTTP server's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot start the HTTP server's thread: {0}")]
    Thread(std::io::Error),
}

/// Serves `metrics` on `listener` (already bound) from a thread pinned to `cpus`, until
/// the process ends.
pub fn spawn(
    listener: TcpListener,
    cpus: CpuList,
    metrics: Arc<Metrics>,
) -> Result<std::thread::JoinHandle<()>, ServerError> {
    listener
        .set_nonblocking(true)
        .map_err(ServerError::Runtime)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(ServerError::Runtime)?;
    std::thread::Builder::new()
        .name("monitor-http".into())
        .spawn(move || {
            // Best effort: with no housekeeping CPU (forced), it shares the measured ones.
            if !cpus.is_empty() {
                let _ = sched::set_affinity(&cpus);
            }
            rt.block_on(serve(listener, metrics));
        })
        .map_err(ServerError::Thread)
}

/// Counts an open connection until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            super::super::output::warn(&format!("the HTTP server cannot listen: {e}"));
            return;
        }
    };
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of file descriptors or a connection reset before accept: wait a little
            // rather than spin on the error.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if open.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::Relaxed);
            drop(stream);
            continue;
        }
        let guard = Open(Arc::clone(&open));
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let _guard = guard;
            let svc = service_fn(move |req| {
                let m = Arc::clone(&metrics);
                async move { Ok::<_, Infallible>(respond(&m, &req)) }
            });
            let mut b = http1::Builder::new();
            b.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_BUF);
            let conn = b.serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(MAX_LIFETIME, conn).await;
        });
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The answer to one request.
pub fn respond<B>(metrics: &Metrics, req: &Request<B>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let readable = matches!(*req.method(), Method::GET | Method::HEAD);
    match (path, readable) {
        ("/metrics", true) => {
            let openmetrics = req
                .headers()
                .get_all(ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            let (body, ctype) = metrics.encode(openmetrics);
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut()
                .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
            r
        }
        ("/metrics" | "/", false) => {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n");
            r.headers_mut()
                .insert(ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
            r
        }
        ("/", true) => text(
            StatusCode::OK,
            "jitterscope monitor: the metrics are at /metrics\n",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        ),
    }
}
