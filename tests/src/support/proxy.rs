//! A TCP proxy in front of a server that can drop a connection at a chosen
//! point: after the server ran a request (its reply is lost), or before
//! the request reached it.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crate::support::wait::wait_until;

/// How long a cut, and what runs while the client is held, may take.
const CUT_WAIT: Duration = Duration::from_secs(60);

/// What the proxy cuts next, and whether it lets requests through.
#[derive(Default)]
struct State {
    /// The next chunk from the server is dropped and its connection cut.
    reply_armed: bool,
    /// Chunks from the server let through first, while armed.
    replies_to_pass: usize,
    /// Chunks from a client let through first, while armed.
    requests_to_pass: usize,
    /// The next chunk from a client is dropped and its connection cut.
    request_armed: bool,
    /// Requests wait before reaching the server (from the cut until
    /// [`ReplyCutter::release`]).
    holding: bool,
    /// Connections cut so far.
    cuts: usize,
    /// Connections accepted so far.
    accepted: usize,
    /// Only connections accepted after the cut are held (see
    /// [`CuttingProxy::hold_new_connections_only`]).
    only_new: bool,
    /// The first connection accepted after the last cut.
    held_from: usize,
}

/// A proxy on a loopback port that forwards to a server and, once armed,
/// cuts the connection that carries the next reply (the request ran) or
/// the next request (it never reaches the server), and holds every
/// request after the cut until released: the test decides what happens on
/// the board before the client's retry gets through.
pub struct CuttingProxy {
    port: u16,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl CuttingProxy {
    /// Starts forwarding loopback connections to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy's port");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let upstream = upstream.to_owned();
        let state = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(&upstream)
                    .unwrap_or_else(|e| panic!("the proxy cannot reach {upstream}: {e}"));
                let conn = {
                    let mut state = state.0.lock().unwrap();
                    state.accepted += 1;
                    state.accepted - 1
                };
                forward(client, server, conn, state.clone());
            }
        });
        CuttingProxy { port, shared }
    }

    /// The proxy's loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The proxy's `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Cuts the connection of the next reply, and holds requests from then on.
    pub fn cut_next_reply(&self) {
        self.shared.0.lock().unwrap().reply_armed = true;
    }

    /// Cuts the connection of the reply after the next `pass` replies
    /// (a verb's reads before its script), and holds requests from then on.
    pub fn cut_reply_after(&self, pass: usize) {
        let mut state = self.shared.0.lock().unwrap();
        state.reply_armed = true;
        state.replies_to_pass = pass;
    }

    /// Cuts the connection of the request after the next `pass` requests
    /// (a new connection's handshake), and holds requests from then on.
    pub fn cut_request_after(&self, pass: usize) {
        let mut state = self.shared.0.lock().unwrap();
        state.request_armed = true;
        state.requests_to_pass = pass;
    }

    /// Cuts the connection of the next request before the server sees
    /// it, and holds requests from then on.
    pub fn cut_next_request(&self) {
        self.shared.0.lock().unwrap().request_armed = true;
    }

    /// From now on a cut holds only the requests of connections made
    /// after it (the client's new connection), so that a client connected
    /// before goes on: on a cluster whose node announces the proxy's port,
    /// a second board can only reach the node through the proxy.
    pub fn hold_new_connections_only(&self) {
        self.shared.0.lock().unwrap().only_new = true;
    }

    /// Lets held requests through.
    pub fn release(&self) {
        self.shared.0.lock().unwrap().holding = false;
        self.shared.1.notify_all();
    }

    /// Connections cut so far.
    pub fn cuts(&self) -> usize {
        self.shared.0.lock().unwrap().cuts
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.0.lock().unwrap().accepted
    }

    /// Runs `call` (a client's call through the proxy) with the proxy
    /// armed by `arm` (one of the `cut_…` methods); `meanwhile` runs
    /// after the cut, while the client is held, and before the call gets
    /// through again on a new connection. Returns what the call returned.
    pub async fn through_a_cut<T, C, M, MF>(
        &self,
        arm: impl FnOnce(&CuttingProxy),
        call: C,
        meanwhile: M,
    ) -> T
    where
        C: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        M: FnOnce() -> MF,
        MF: Future<Output = ()>,
    {
        let (accepted, cuts) = (self.accepted(), self.cuts());
        arm(self);
        let task = tokio::spawn(call);
        wait_until("the connection is cut", CUT_WAIT, || async { self.cuts() > cuts }).await;
        tokio::time::timeout(CUT_WAIT, meanwhile())
            .await
            .expect("what runs while the client is held ends");
        self.release();
        let result = task.await.unwrap();
        assert!(
            self.accepted() > accepted,
            "the call went again on a new connection"
        );
        result
    }
}

/// Two threads: requests to the server, replies to the client. The armed
/// chunk is dropped and both ends shut; requests wait while held.
fn forward(client: TcpStream, server: TcpStream, conn: usize, shared: Arc<(Mutex<State>, Condvar)>) {
    let (client_in, server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = shared.clone();
    thread::spawn(move || pass(client_in, server_out, conn, &up, Direction::Request));
    thread::spawn(move || pass(server, client, conn, &shared, Direction::Reply));
}

/// Which way a chunk goes.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Request,
    Reply,
}

/// Copies chunks `from` → `to` (of connection number `conn`) until
/// either end closes or a cut.
fn pass(
    mut from: TcpStream,
    mut to: TcpStream,
    conn: usize,
    shared: &(Mutex<State>, Condvar),
    way: Direction,
) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        {
            let (lock, released) = shared;
            let mut state = lock.lock().unwrap();
            if way == Direction::Request {
                state = released
                    .wait_while(state, |s| s.holding && (!s.only_new || conn >= s.held_from))
                    .unwrap();
            }
            if way == Direction::Reply && state.reply_armed && state.replies_to_pass > 0 {
                state.replies_to_pass -= 1;
            } else if way == Direction::Request && state.request_armed && state.requests_to_pass > 0 {
                state.requests_to_pass -= 1;
            } else if std::mem::take(match way {
                Direction::Request => &mut state.request_armed,
                Direction::Reply => &mut state.reply_armed,
            }) {
                state.holding = true;
                state.held_from = state.accepted;
                state.cuts += 1;
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
