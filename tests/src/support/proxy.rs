//! A TCP proxy in front of a server that can lose one reply on its way:
//! the request reaches the server, which runs it, and the client sees its
//! connection drop instead of the answer.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// What the proxy does with the next reply, and whether it lets requests
/// through.
#[derive(Default)]
struct State {
    /// The next chunk from the server is dropped and its connection cut.
    armed: bool,
    /// Requests wait before reaching the server (from the cut until
    /// [`ReplyCutter::release`]).
    holding: bool,
    /// Connections cut so far.
    cuts: usize,
    /// Connections accepted so far.
    accepted: usize,
}

/// A proxy on a loopback port that forwards to a server and, once armed,
/// cuts the connection that carries the next reply (the request ran) and
/// holds every request after it until released: the test decides what
/// happens on the board before the client's retry gets through.
pub struct ReplyCutter {
    port: u16,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl ReplyCutter {
    /// Starts forwarding loopback connections to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> ReplyCutter {
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
                state.0.lock().unwrap().accepted += 1;
                forward(client, server, state.clone());
            }
        });
        ReplyCutter { port, shared }
    }

    /// The proxy's `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Cuts the connection of the next reply, and holds requests from then on.
    pub fn arm(&self) {
        self.shared.0.lock().unwrap().armed = true;
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
}

/// Two threads: requests to the server (waiting while held), replies to
/// the client (the armed one dropped, both ends shut).
fn forward(client: TcpStream, server: TcpStream, shared: Arc<(Mutex<State>, Condvar)>) {
    let (mut client_in, mut server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = shared.clone();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = client_in.read(&mut buf) {
            let (lock, released) = &*up;
            drop(released.wait_while(lock.lock().unwrap(), |s| s.holding).unwrap());
            if server_out.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = server_out.shutdown(Shutdown::Both);
    });
    let (mut server_in, mut client_out) = (server, client);
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = server_in.read(&mut buf) {
            {
                let mut state = shared.0.lock().unwrap();
                if state.armed {
                    state.armed = false;
                    state.holding = true;
                    state.cuts += 1;
                    break;
                }
            }
            if client_out.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = client_out.shutdown(Shutdown::Both);
        let _ = server_in.shutdown(Shutdown::Both);
    });
}
