//! The client side: a minimal blocking RESP connection that probes whether
//! the server is ready.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;

use super::{RedisServer, PROBE_IO_TIMEOUT};

impl RedisServer {
    /// One readiness probe: `PING`, then `INFO server` for the PID.
    /// `Ok(None)` while the server answers but is not ready (`-LOADING`).
    pub(super) fn probe(&self) -> io::Result<Option<u32>> {
        let mut conn = RawConn::connect(self)?;
        match conn.command(&["PING"])? {
            Reply::Simple(s) if s == "PONG" => {}
            Reply::Error(_) => return Ok(None),
            other => return Err(io::Error::other(format!("unexpected PING reply {other:?}"))),
        }
        match conn.command(&["INFO", "server"])? {
            Reply::Bulk(Some(info)) => {
                let info = String::from_utf8_lossy(&info);
                info.lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|pid| pid.trim().parse().ok())
                    .map(Some)
                    .ok_or_else(|| io::Error::other("INFO server has no process_id"))
            }
            other => Err(io::Error::other(format!("unexpected INFO reply {other:?}"))),
        }
    }
}

/// A RESP reply, as far as the probe and the unit tests need it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// A blocking RESP connection over TCP or a unix socket.
pub(super) struct RawConn {
    reader: BufReader<Box<dyn ReadWrite>>,
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl RawConn {
    /// Connects to `server`'s port or socket with short timeouts.
    pub(super) fn connect(server: &RedisServer) -> io::Result<RawConn> {
        let stream: Box<dyn ReadWrite> = match (&server.socket, server.port) {
            (Some(socket), _) => {
                let s = UnixStream::connect(socket)?;
                s.set_read_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_write_timeout(Some(PROBE_IO_TIMEOUT))?;
                Box::new(s)
            }
            (None, Some(port)) => {
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
                let s = TcpStream::connect_timeout(&addr, PROBE_IO_TIMEOUT)?;
                s.set_read_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_write_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_nodelay(true)?;
                Box::new(s)
            }
            (None, None) => return Err(io::Error::other("server has no address")),
        };
        Ok(RawConn {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command as a RESP array of bulk strings and reads the reply.
    pub(super) fn command(&mut self, args: &[&str]) -> io::Result<Reply> {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            buf.extend_from_slice(arg.as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
        let stream = self.reader.get_mut();
        stream.write_all(&buf)?;
        stream.flush()?;
        self.read_reply()
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed by redis-server",
            ));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_owned())
    }

    fn read_reply(&mut self) -> io::Result<Reply> {
        let line = self.read_line()?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad reply {line:?}"));
        let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        match kind {
            "+" => Ok(Reply::Simple(rest.to_owned())),
            "-" => Ok(Reply::Error(rest.to_owned())),
            ":" => rest.parse().map(Reply::Integer).map_err(|_| bad()),
            "$" => {
                let len: i64 = rest.parse().map_err(|_| bad())?;
                if len < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let len = usize::try_from(len).map_err(|_| bad())?;
                let mut data = vec![0; len + 2];
                self.reader.read_exact(&mut data)?;
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
            "*" => {
                let len: i64 = rest.parse().map_err(|_| bad())?;
                if len < 0 {
                    return Ok(Reply::Array(None));
                }
                let items = (0..len)
                    .map(|_| self.read_reply())
                    .collect::<io::Result<Vec<_>>>()?;
                Ok(Reply::Array(Some(items)))
            }
            _ => Err(bad()),
        }
    }
}
