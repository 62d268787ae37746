//! The supervisor's tiny metrics server, run from its own loop (no thread,
//! no runtime: the supervisor forks). The listener and every client are
//! non-blocking and waited on in the same `poll(2)` as the signals; each
//! wake-up accepts what is pending, reads what the clients sent, answers
//! every complete request (`GET /metrics`; any other path is a 404) and
//! closes. A client has [`REQUEST_DEADLINE`] to send its request and at
//! most [`MAX_REQUEST`] bytes for it; a slow or silent one is dropped and
//! never stalls the loop. Forked workers drop the listener at once (and it
//! closes on exec).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a client may take to send its request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// The longest request read (the request line and headers).
const MAX_REQUEST: usize = 8 * 1024;
/// Clients waited on at once; a new one beyond this drops the oldest.
const MAX_CLIENTS: usize = 32;
/// How long the listener is left alone after `accept` failed (out of
/// descriptors, say), so that a listener that stays readable does not
/// make the loop spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(250);
/// The content type of `prometheus-client`'s encoding.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The listening socket and the clients whose request is not in yet.
pub(super) struct MetricsHttp {
    /// The listening socket (non-blocking, closes on exec).
    listener: TcpListener,
    /// Clients whose request is not complete yet, oldest first.
    clients: Vec<Client>,
    /// Until when the listener is not waited on (after `accept` failed).
    paused: Option<Instant>,
}

/// A connected client still sending its request.
struct Client {
    /// Its connection (non-blocking).
    stream: TcpStream,
    /// What it sent so far.
    request: Vec<u8>,
    /// When it is dropped if its request is not complete.
    deadline: Instant,
}

/// What a client's bytes so far amount to.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    /// The request line and headers are in.
    Complete,
    /// More is to come.
    Partial,
    /// The client went away, sent too much, or failed.
    Gone,
}

impl MetricsHttp {
    /// Listens on `addr` (a port of 0 picks a free one), non-blocking.
    pub(super) fn bind(addr: SocketAddr) -> Result<MetricsHttp> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| Error::invalid(format!("--metrics-listen {addr}: cannot listen there: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("cannot make the metrics listener non-blocking", e))?;
        Ok(MetricsHttp {
            listener,
            clients: Vec::new(),
            paused: None,
        })
    }

    /// The address it listens on (the port picked, for a port of 0).
    pub(super) fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("cannot read the metrics listener's address", e))
    }

    /// The sockets to wait on: the listener (unless paused) and every
    /// client.
    pub(super) fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        let clients = self.clients.iter().map(|c| c.stream.as_fd());
        let listener = self.paused.is_none().then(|| self.listener.as_fd());
        listener.into_iter().chain(clients)
    }

    /// When the loop must look again: the oldest client's deadline, or
    /// the end of the listener's pause.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.clients.iter().map(|c| c.deadline).chain(self.paused).min()
    }

    /// Accepts the pending clients, answers those whose request is in
    /// with `metrics` (called once per answered scrape), drops those past
    /// their deadline. Never blocks.
    pub(super) fn serve(&mut self, now: Instant, mut metrics: impl FnMut() -> String) {
        self.accept(now);
        let mut waiting = Vec::with_capacity(self.clients.len());
        for mut client in std::mem::take(&mut self.clients) {
            match client.read() {
                Got::Complete => client.answer(&mut metrics),
                Got::Partial if client.deadline > now => waiting.push(client),
                Got::Partial => tracing::debug!("metrics client too slow; dropped"),
                Got::Gone => {}
            }
        }
        self.clients = waiting;
    }

    /// Accepts every pending connection (unless paused).
    fn accept(&mut self, now: Instant) {
        match self.paused {
            Some(until) if until > now => return,
            _ => self.paused = None,
        }
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.clients.len() >= MAX_CLIENTS {
                        self.clients.remove(0);
                    }
                    self.clients.push(Client {
                        stream,
                        request: Vec::new(),
                        deadline: now + REQUEST_DEADLINE,
                    });
                }
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::ConnectionAborted) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors, say: try again after a pause.
                    tracing::warn!(error = %e, "cannot accept a metrics client; pausing");
                    self.paused = Some(now + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }
}

impl Client {
    /// Reads what the client sent since the last look.
    fn read(&mut self) -> Got {
        let mut buf = [0u8; 2048];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Got::Gone,
                Ok(n) => {
                    self.request.extend_from_slice(&buf[..n]);
                    if headers_end(&self.request) {
                        return Got::Complete;
                    }
                    if self.request.len() > MAX_REQUEST {
                        return Got::Gone;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Got::Partial,
                Err(_) => return Got::Gone,
            }
        }
    }

    /// Writes the response and closes. The response fits the socket's
    /// buffer; a client that does not let it is dropped.
    fn answer(mut self, metrics: &mut impl FnMut() -> String) {
        let response = respond(&self.request, metrics);
        let mut rest = &response[..];
        while !rest.is_empty() {
            match self.stream.write(rest) {
                Ok(0) => return,
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }
}

/// True once `request` holds the blank line that ends the headers.
fn headers_end(request: &[u8]) -> bool {
    request.windows(4).any(|w| w == b"\r\n\r\n") || request.windows(2).any(|w| w == b"\n\n")
}

/// The whole response to `request`.
fn respond(request: &[u8], metrics: &mut impl FnMut() -> String) -> Vec<u8> {
    let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        (_, p) if p != "/metrics" => (
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n".to_owned(),
        ),
        ("GET" | "HEAD", _) => ("200 OK", CONTENT_TYPE, metrics()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_owned(),
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(request: &str) -> String {
        String::from_utf8(respond(request.as_bytes(), &mut || "m 1\n".to_owned())).unwrap()
    }

    #[test]
    fn only_get_of_metrics_is_answered_with_the_metrics() {
        let ok = answer("GET /metrics HTTP/1.0\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Length: 4\r\n") && ok.ends_with("\r\n\r\nm 1\n"),
            "{ok}"
        );
        assert!(answer("GET /metrics?x=1 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
        assert!(answer("GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(answer("GET /metricsx HTTP/1.0\n\n").starts_with("HTTP/1.1 404 "));
        assert!(answer("POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 405 "));
        assert!(answer("garbage").starts_with("HTTP/1.1 404 "));
        let head = answer("HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
    }

    #[test]
    fn a_request_is_complete_at_the_blank_line() {
        assert!(!headers_end(b"GET /metrics HTTP/1.0\r\nHost: x\r\n"));
        assert!(headers_end(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n"));
        assert!(headers_end(b"GET /metrics HTTP/1.0\n\n"));
    }

    #[test]
    fn a_silent_client_is_dropped_at_its_deadline_and_others_are_answered() {
        let mut http = MetricsHttp::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = http.local_addr().unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let mut scraper = TcpStream::connect(addr).unwrap();
        scraper.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        // Both connections are queued on the listener (loopback); serve
        // until the scraper is answered.
        let start = Instant::now();
        let mut served = 0;
        while served == 0 {
            assert!(start.elapsed() < Duration::from_secs(30), "never answered");
            http.serve(Instant::now(), || {
                served += 1;
                "m 1\n".to_owned()
            });
        }
        let mut got = String::new();
        scraper.read_to_string(&mut got).unwrap();
        assert!(
            got.starts_with("HTTP/1.1 200 OK") && got.ends_with("m 1\n"),
            "{got}"
        );
        assert_eq!(http.clients.len(), 1, "the silent client waits");
        http.serve(Instant::now() + REQUEST_DEADLINE * 2, String::new);
        assert!(http.clients.is_empty(), "the silent client is dropped");
    }
}
