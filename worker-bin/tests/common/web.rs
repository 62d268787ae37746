//! `jobworker web` as an operator runs it: a real process on a free port,
//! and a minimal HTTP/1.1 client (one request per connection) to talk to
//! it without a browser.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::common::cli::jobworker_command;

/// How long the app may take to start listening.
const START: Duration = Duration::from_secs(60);

/// A running `jobworker web`.
pub struct WebApp {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: mpsc::Receiver<String>,
}

/// A response: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl WebApp {
    /// Starts `jobworker --redis URL web --listen 127.0.0.1:0 ARGS` and
    /// waits for the address it prints.
    pub fn start(url: &str, args: &[&str], env: &[(&str, &str)]) -> WebApp {
        Self::start_on(&["--redis", url], args, env)
    }

    /// Starts on the board given by `board` (e.g. `["--zookeeper", …]`).
    pub fn start_on(board: &[&str], args: &[&str], env: &[(&str, &str)]) -> WebApp {
        let mut child = jobworker_command()
            .args(board)
            .args(["web", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start jobworker web");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let addr = loop {
            match rx.recv_timeout(START) {
                Ok(line) => {
                    if let Some(rest) = line.split("web app on http://").nth(1) {
                        break rest.trim_end_matches('/').to_owned();
                    }
                    seen.push(line);
                }
                Err(_) => panic!(
                    "jobworker web did not start within {START:?}; stderr:\n{}",
                    seen.join("\n")
                ),
            }
        };
        WebApp { child, addr, log: rx }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the app wrote on stderr since the last call.
    pub fn log(&self) -> String {
        self.log.try_iter().collect::<Vec<_>>().join("\n")
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], "")
    }

    /// A form POST (`application/x-www-form-urlencoded`).
    pub fn post(&self, path: &str, headers: &[(&str, &str)], form: &str) -> Reply {
        let mut h = vec![("content-type", "application/x-www-form-urlencoded")];
        h.extend_from_slice(headers);
        self.request("POST", path, &h, form)
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut s = TcpStream::connect(&self.addr).expect("connect to jobworker web");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in headers {
            req += &format!("{k}: {v}\r\n");
        }
        req += "\r\n";
        req += body;
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        parse(&raw)
    }

    /// Stops the app with SIGTERM; asserts it exits 0 in time.
    pub fn stop(mut self) {
        // SAFETY: signalling our own child by its pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) }, 0);
        let end = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "jobworker web exited with {status}: {}",
                    self.log()
                );
                return;
            }
            assert!(
                std::time::Instant::now() < end,
                "jobworker web did not stop on SIGTERM"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for WebApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse(raw: &[u8]) -> Reply {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw.get(split + 4..).unwrap_or_default();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<HashMap<_, _>>();
    let body = if headers.get("transfer-encoding").is_some_and(|t| t == "chunked") {
        unchunk(body)
    } else {
        body.to_vec()
    };
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&body[..eol]).trim().to_owned();
        let n = usize::from_str_radix(&size, 16).unwrap_or(0);
        let rest = &body[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        body = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// The CSRF token of a page (its hidden `csrf` input).
pub fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a CSRF field on the page")
        + 19;
    page[at..].split('"').next().unwrap().to_owned()
}
