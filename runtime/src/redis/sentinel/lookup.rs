//! Asking the sentinels which server is master.
//!
//! Every sentinel is asked (`SENTINEL MASTER <name>`, each with
//! [`ASK_TIMEOUT`]) and the answer with the highest config epoch wins: a
//! failover bumps the epoch, and a sentinel that has not heard of it yet
//! still names the old master. Taking the first answer instead (what
//! redis-rs' sentinel client does) followed such a sentinel to an old
//! master restarted on its address, which takes writes, with no replica,
//! until the sentinels demote it (seen in CI). Sentinels that call the
//! master down do not count. The server named must then answer `ROLE`
//! as master.

use std::collections::HashMap;
use std::time::Duration;

use super::SentinelUrl;
use crate::error::{Error, Result};

/// How long asking one sentinel, or checking the master's role, may take:
/// redis-rs sets no timeout, and a call that waits on the lookup holds
/// every other call of the process (they wait for the same answer).
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// One sentinel's answer: where the master is, as of which config epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    host: String,
    port: u16,
    epoch: u64,
}

/// The view in a `SENTINEL MASTER` reply, unless that sentinel calls the
/// master down or the reply lacks a field.
fn view_of(fields: &HashMap<String, String>) -> Option<View> {
    let flags = fields.get("flags")?;
    if flags
        .split(',')
        .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"))
    {
        return None;
    }
    Some(View {
        host: fields.get("ip")?.clone(),
        port: fields.get("port")?.parse().ok()?,
        epoch: fields.get("config-epoch")?.parse().ok()?,
    })
}

/// The view of the newest configuration (the first of equals).
fn newest(views: impl IntoIterator<Item = View>) -> Option<View> {
    views.into_iter().fold(None, |best: Option<View>, v| match best {
        Some(b) if b.epoch >= v.epoch => Some(b),
        _ => Some(v),
    })
}

fn at(host: &str, port: u16) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

fn scheme(url: &SentinelUrl) -> &'static str {
    if url.tls {
        "rediss"
    } else {
        "redis"
    }
}

/// A client of one sentinel (asked without credentials).
fn sentinel_client(url: &SentinelUrl, host: &str, port: u16) -> Result<redis::Client> {
    super::super::connect::client(&format!("{}://{}/", scheme(url), at(host, port)))
}

/// A client of the master at `host:port`, with the URL's credentials and
/// database.
fn master_client(url: &SentinelUrl, host: &str, port: u16) -> Result<redis::Client> {
    let auth = match (&url.user, &url.password) {
        (None, None) => String::new(),
        (user, password) => format!(
            "{}:{}@",
            percent_encode(user.as_deref().unwrap_or("")),
            percent_encode(password.as_deref().unwrap_or(""))
        ),
    };
    super::super::connect::client(&format!("{}://{auth}{}/{}", scheme(url), at(host, port), url.db))
}

fn master_cmd(url: &SentinelUrl) -> redis::Cmd {
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("MASTER").arg(&url.master);
    cmd
}

/// An error unless a `ROLE` reply says master.
fn must_be_master(role: &[redis::Value], v: &View) -> Result<()> {
    match role.first() {
        Some(redis::Value::BulkString(r)) if r == b"master" => Ok(()),
        _ => Err(Error::unavailable(format!(
            "{} is not a master (yet)",
            at(&v.host, v.port)
        ))),
    }
}

fn no_master(url: &SentinelUrl) -> Error {
    Error::unavailable(format!(
        "the sentinels name no master {:?} that is up (asked {} within {ASK_TIMEOUT:?})",
        url.master,
        url.sentinels.len()
    ))
}

/// The client of the master the sentinels name now (see the module docs).
pub(crate) async fn ask(url: &SentinelUrl) -> Result<redis::Client> {
    let asks = url.sentinels.iter().map(|(host, port)| async move {
        let sentinel = sentinel_client(url, host, *port).ok()?;
        let answer = tokio::time::timeout(ASK_TIMEOUT, async {
            let mut con = sentinel.get_multiplexed_async_connection().await?;
            master_cmd(url)
                .query_async::<HashMap<String, String>>(&mut con)
                .await
        });
        view_of(&answer.await.ok()?.ok()?)
    });
    let views = futures_util::future::join_all(asks).await.into_iter().flatten();
    let best = newest(views).ok_or_else(|| no_master(url))?;
    let master = master_client(url, &best.host, best.port)?;
    let role = tokio::time::timeout(ASK_TIMEOUT, async {
        let mut con = master.get_multiplexed_async_connection().await?;
        redis::cmd("ROLE")
            .query_async::<Vec<redis::Value>>(&mut con)
            .await
    })
    .await
    .map_err(|_| Error::unavailable(format!("{} did not answer ROLE", at(&best.host, best.port))))??;
    must_be_master(&role, &best)?;
    Ok(master)
}

/// [`ask`], the blocking way with `timeout` on every connect and read (the
/// supervisor's board, which runs no async runtime).
pub(crate) fn ask_blocking(url: &SentinelUrl, timeout: Duration) -> Result<redis::Client> {
    let views = url.sentinels.iter().filter_map(|(host, port)| {
        let sentinel = sentinel_client(url, host, *port).ok()?;
        let fields: HashMap<String, String> = query_blocking(&sentinel, &master_cmd(url), timeout).ok()?;
        view_of(&fields)
    });
    let best = newest(views).ok_or_else(|| no_master(url))?;
    let master = master_client(url, &best.host, best.port)?;
    let role: Vec<redis::Value> = query_blocking(&master, &redis::cmd("ROLE"), timeout)?;
    must_be_master(&role, &best)?;
    Ok(master)
}

fn query_blocking<T: redis::FromRedisValue>(
    client: &redis::Client,
    cmd: &redis::Cmd,
    timeout: Duration,
) -> Result<T> {
    let mut con = client.get_connection_with_timeout(timeout)?;
    con.set_read_timeout(Some(timeout))?;
    con.set_write_timeout(Some(timeout))?;
    Ok(cmd.query(&mut con)?)
}

/// `%XX`-escapes all but URL-unreserved characters (a user or password).
pub(super) fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(port: &str, epoch: &str, flags: &str) -> HashMap<String, String> {
        [
            ("ip", "127.0.0.1"),
            ("port", port),
            ("config-epoch", epoch),
            ("flags", flags),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn the_newest_epoch_wins_and_a_master_called_down_does_not_count() {
        // A sentinel that missed the failover answers first, with the old
        // master (restarted, so up) and the old epoch.
        let lagging = view_of(&reply("6379", "0", "master")).unwrap();
        let current = view_of(&reply("6380", "1", "master")).unwrap();
        assert_eq!(newest([lagging.clone(), current.clone()]), Some(current.clone()));
        assert_eq!(newest([current.clone(), lagging.clone()]), Some(current));
        assert_eq!(view_of(&reply("6380", "2", "master,s_down")), None);
        assert_eq!(view_of(&reply("6380", "2", "master,o_down,disconnected")), None);
        assert_eq!(newest(Vec::new()), None);
        let mut partial = reply("6380", "1", "master");
        partial.remove("config-epoch");
        assert_eq!(view_of(&partial), None);
    }
}
