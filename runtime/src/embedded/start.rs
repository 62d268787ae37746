//! Starting a server: the data dir, the socket path and the retries on
//! free loopback ports.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use super::{
    RedisServer, ServerOptions, StartFailure, Transport, MAX_SOCKET_PATH, PORT_ATTEMPTS, SOCKET_FILE,
};
use crate::error::{Error, Result};

impl RedisServer {
    /// Starts `redis-server` with `opts` and waits (up to
    /// [`READY_TIMEOUT`](super::READY_TIMEOUT)) until it answers `PING`.
    ///
    /// Arguments:
    /// - TCP: `--bind 127.0.0.1 --port P`;
    /// - unix: `--port 0 --unixsocket DIR/redis.sock --unixsocketperm 700`;
    /// - `--save ''` unless `appendonly` (then `--appendonly yes
    ///   --appendfsync everysec`);
    /// - `--dir DIR --daemonize no --protected-mode no`, then `extra_args`.
    ///
    /// Output (stdout and stderr) goes to `DIR/redis.log`. When the port is
    /// picked here and the server loses it to another process, the start is
    /// retried on a new port (up to [`PORT_ATTEMPTS`] times).
    ///
    /// The child gets `PDEATHSIG=SIGKILL`: it dies when the calling *thread*
    /// exits (see the module docs).
    ///
    /// Errors: [`Error::unavailable`] when `redis-server` is not on `PATH` or
    /// never answers (the message quotes the end of `redis.log`),
    /// [`Error::invalid`] for a data dir whose socket path would be too long,
    /// [`Error::io`] when the data dir cannot be made.
    pub fn start(opts: ServerOptions) -> Result<RedisServer> {
        let (dir, temp) = match &opts.data_dir {
            Some(dir) => {
                fs::create_dir_all(dir)
                    .map_err(|e| Error::io(&format!("cannot create data dir {}", dir.display()), e))?;
                let dir = dir
                    .canonicalize()
                    .map_err(|e| Error::io(&format!("cannot resolve data dir {}", dir.display()), e))?;
                (dir, None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("jobworker-redis-")
                    .tempdir()
                    .map_err(|e| Error::io("cannot create temp dir for redis-server", e))?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let socket = match opts.transport {
            Transport::Unix => {
                let socket = dir.join(SOCKET_FILE);
                if socket.as_os_str().len() > MAX_SOCKET_PATH {
                    return Err(Error::invalid(format!(
                        "unix socket path {} is longer than {MAX_SOCKET_PATH} bytes; \
                         choose a shorter data dir",
                        socket.display()
                    )));
                }
                Some(socket)
            }
            Transport::Tcp { .. } => None,
        };
        let mut server = RedisServer {
            opts,
            dir,
            port: None,
            socket,
            child: None,
            pid: 0,
            _temp: temp,
        };
        match server.opts.transport {
            Transport::Unix => server.launch().map_err(StartFailure::into_error)?,
            Transport::Tcp { port: Some(port) } => {
                server.port = Some(port);
                server.launch().map_err(StartFailure::into_error)?;
            }
            Transport::Tcp { port: None } => {
                let mut last = None;
                for _ in 0..PORT_ATTEMPTS {
                    server.port = Some(free_port()?);
                    match server.launch() {
                        Ok(()) => {
                            last = None;
                            break;
                        }
                        Err(StartFailure::PortLost(e)) => last = Some(e),
                        Err(StartFailure::Fatal(e) | StartFailure::Exited(e)) => return Err(e),
                    }
                }
                if let Some(e) = last {
                    return Err(Error::unavailable(format!(
                        "redis-server did not start after {PORT_ATTEMPTS} attempts on free ports: {}",
                        e.message()
                    )));
                }
            }
        }
        Ok(server)
    }
}

/// A free loopback port: bind port 0, read it, release it.
pub(super) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .map_err(|e| Error::io("cannot bind a free loopback port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the free loopback port", e))?
        .port();
    Ok(port)
}
