//! Redis Sentinel: the `redis+sentinel://` URL, and a command connection
//! that follows the master the sentinels name through a failover.
//!
//! redis-rs resolves a master through the sentinels but does not follow a
//! failover: its reconnecting connection keeps the address it started
//! with. So a [`FollowMaster`] holds the master's client and connection,
//! and asks the sentinels again when a call fails in a way that says the
//! master is gone or no longer master (a dropped or refused connection, a
//! timeout, `READONLY`, `MASTERDOWN`). The call itself fails; callers retry
//! as they do after any dropped connection (`connect::retry_once`), and
//! then reach the new master.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod lookup;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisError;

use crate::error::{Error, Result};
use lookup::ask;
pub(crate) use lookup::ask_blocking as master_blocking;

/// URL schemes of a board behind sentinels (plain and TLS).
const SCHEMES: [(&str, bool); 2] = [("redis+sentinel://", false), ("rediss+sentinel://", true)];

/// A parsed `redis+sentinel://[user:password@]host:port[,host:port…]/MASTER[/db]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    /// The sentinels' addresses.
    pub sentinels: Vec<(String, u16)>,
    /// The master's name in the sentinels' configuration.
    pub master: String,
    pub db: i64,
    /// Credentials for the master (the sentinels are asked without).
    pub user: Option<String>,
    pub password: Option<String>,
    /// TLS to the master and the sentinels (`rediss+sentinel://`).
    pub tls: bool,
}

/// Parses a sentinel URL; `None` when `url` is not one.
pub(crate) fn parse(url: &str) -> Option<Result<SentinelUrl>> {
    let (scheme, tls) = SCHEMES.into_iter().find(|(s, _)| url.starts_with(s))?;
    Some(parse_rest(&url[scheme.len()..], tls).map_err(|why| {
        Error::invalid(format!(
            "bad sentinel url {}: {why} (expected {scheme}[user:password@]host:port[,host:port…]/MASTER_NAME[/db])",
            super::connect::redact(url)
        ))
    }))
}

fn parse_rest(rest: &str, tls: bool) -> std::result::Result<SentinelUrl, String> {
    let (auth, rest) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (hosts, path) = rest.split_once('/').ok_or("no master name")?;
    let mut path = path.trim_end_matches('/').split('/');
    let master = path.next().filter(|m| !m.is_empty()).ok_or("no master name")?;
    let db = match path.next() {
        Some(db) => db.parse().map_err(|_| format!("bad database {db:?}"))?,
        None => 0,
    };
    if path.next().is_some() {
        return Err("too many path parts".into());
    }
    let sentinels = hosts
        .split(',')
        .map(|h| {
            let (host, port) = h.rsplit_once(':').ok_or(format!("{h:?} has no port"))?;
            let port = port.parse().map_err(|_| format!("bad port in {h:?}"))?;
            Ok((host.trim_matches(['[', ']']).to_owned(), port))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let decode = |s: &str| percent_decode(s).ok_or(format!("bad escape in {s:?}"));
    let (user, password) = match auth.map(|a| a.split_once(':').unwrap_or((a, ""))) {
        Some((u, p)) => (
            Some(decode(u)?).filter(|u| !u.is_empty()),
            Some(decode(p)?).filter(|p| !p.is_empty()),
        ),
        None => (None, None),
    };
    Ok(SentinelUrl {
        sentinels,
        master: decode(master)?,
        db,
        user,
        password,
        tls,
    })
}

/// Decodes `%XX` escapes (as in any URL's user and password).
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// The master a [`FollowMaster`] talks to now.
pub(crate) struct Master {
    /// Its client (pub/sub connections are opened from it).
    pub client: redis::Client,
    pub manager: ConnectionManager,
}

/// A connection to whichever server the sentinels name master.
pub(crate) struct FollowMaster {
    /// The sentinels and the master's name; held while they are asked.
    sentinels: tokio::sync::Mutex<SentinelUrl>,
    current: Mutex<Arc<Master>>,
    config: ConnectionManagerConfig,
    asked: Mutex<Asked>,
}

/// When the sentinels were last asked, and until when every call asks
/// them first (at most every [`ASK_EVERY`]).
#[derive(Default)]
struct Asked {
    last: Option<Instant>,
    unsettled_until: Option<Instant>,
}

/// After a failure that says the master may have moved, calls ask the
/// sentinels again for this long: an old master restarted on its address
/// takes writes, and loses them, until the sentinels make it a replica.
const UNSETTLED_FOR: Duration = Duration::from_secs(30);
/// How often calls ask the sentinels while unsettled, at most.
const ASK_EVERY: Duration = Duration::from_millis(500);
/// How often writes their replicas did not acknowledge ask the sentinels.
const SHORT_ASK_EVERY: Duration = Duration::from_secs(5);
/// Failed calls that arrive together ask once.
const ASK_AGAIN_AFTER: Duration = Duration::from_millis(200);

impl FollowMaster {
    /// Asks the sentinels for the master and connects to it.
    pub(crate) async fn connect(url: &SentinelUrl, config: ConnectionManagerConfig) -> Result<FollowMaster> {
        let client = ask(url).await?;
        let master = open(client, &config).await?;
        Ok(FollowMaster {
            sentinels: tokio::sync::Mutex::new(url.clone()),
            current: Mutex::new(Arc::new(master)),
            config,
            // Just asked: a subscriber opened at once need not ask again.
            asked: Mutex::new(Asked {
                last: Some(Instant::now()),
                unsettled_until: None,
            }),
        })
    }

    /// The master as last resolved.
    pub(crate) fn current(&self) -> Arc<Master> {
        Arc::clone(&self.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The master to send a call to: while a failover may be under way,
    /// asked of the sentinels first (every [`ASK_EVERY`] at most).
    pub(crate) async fn current_checked(&self) -> Arc<Master> {
        let seen = self.current();
        let due = {
            let asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            asked.unsettled_until.is_some_and(|t| now < t) && asked.last.is_none_or(|l| now - l >= ASK_EVERY)
        };
        if due {
            self.follow(&seen).await;
        }
        self.current()
    }

    /// The master, asked of the sentinels first: for a connection that
    /// will only listen. It sends no call that would find the master
    /// moved, and an old master made a replica (the sentinels close its
    /// clients' connections as they demote it) still takes subscriptions,
    /// while posts go to the new one.
    pub(crate) async fn confirmed(&self) -> Arc<Master> {
        self.follow(&self.current()).await;
        self.current()
    }

    /// After `error` on a call to `seen`: when it says the master may have
    /// moved, asks the sentinels again and switches to the master they
    /// name, and keeps asking for a while ([`UNSETTLED_FOR`]). A write its
    /// replicas did not acknowledge (an old master restarted on its
    /// address has none; a lagging replica is likelier) asks once, at most
    /// every [`SHORT_ASK_EVERY`].
    pub(crate) async fn check(&self, seen: &Arc<Master>, error: &RedisError) {
        if super::durability::is_short(error) {
            let asked = self.asked.lock().unwrap_or_else(|p| p.into_inner()).last;
            if asked.is_none_or(|l| l.elapsed() >= SHORT_ASK_EVERY) {
                self.follow(seen).await;
            }
            return;
        }
        if master_may_have_moved(error) {
            self.doubt(seen, error).await;
        }
    }

    /// After a failure that says the master may have moved (a call's, or a
    /// pub/sub connection's that could not be opened: a process that only
    /// listens sends no call): asks the sentinels again and keeps asking
    /// for a while ([`UNSETTLED_FOR`]).
    pub(crate) async fn doubt(&self, seen: &Arc<Master>, error: &(dyn std::fmt::Display + Sync)) {
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unsettled_until = Some(Instant::now() + UNSETTLED_FOR);
        tracing::warn!(error = %error, "redis call failed; asking the sentinels for the master");
        self.follow(seen).await;
    }

    /// Asks the sentinels and switches when they name another master than
    /// `seen` (once for the calls that saw `seen`, and not again within
    /// [`ASK_AGAIN_AFTER`]).
    async fn follow(&self, seen: &Arc<Master>) {
        let sentinels = self.sentinels.lock().await;
        if !Arc::ptr_eq(&self.current(), seen) {
            return;
        }
        {
            let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
            if asked.last.is_some_and(|l| l.elapsed() < ASK_AGAIN_AFTER) {
                return;
            }
            asked.last = Some(Instant::now());
        }
        let named = match ask(&sentinels).await {
            Ok(client) => client,
            Err(e) => return tracing::warn!(error = %e, "cannot ask the sentinels for the master"),
        };
        let addr = named.get_connection_info().addr().clone();
        if addr == *seen.client.get_connection_info().addr() {
            return;
        }
        match open(named, &self.config).await {
            Ok(master) => {
                tracing::warn!(master = %addr, "following the master the sentinels name");
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(master);
            }
            Err(e) => {
                tracing::warn!(master = %addr, error = %e, "cannot reach the master the sentinels name")
            }
        }
    }
}

/// Whether a failed call may mean the master moved: a connection that
/// dropped, was refused or timed out, or a server that is no longer (or not
/// yet) a writable master.
pub(crate) fn master_may_have_moved(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

async fn open(client: redis::Client, config: &ConnectionManagerConfig) -> Result<Master> {
    let manager = ConnectionManager::new_with_config(client.clone(), config.clone())
        .await
        .map_err(|e| Error::unavailable(format!("cannot reach the master the sentinels name: {e}")))?;
    Ok(Master { client, manager })
}

#[cfg(test)]
mod tests {
    use super::lookup::percent_encode;
    use super::*;

    #[test]
    fn a_sentinel_url_reads_back() {
        let u = parse("redis+sentinel://app:p%40ss@10.0.0.1:26379,[::1]:26380/mymaster/3")
            .unwrap()
            .unwrap();
        assert_eq!(
            u,
            SentinelUrl {
                sentinels: vec![("10.0.0.1".into(), 26379), ("::1".into(), 26380)],
                master: "mymaster".into(),
                db: 3,
                user: Some("app".into()),
                password: Some("p@ss".into()),
                tls: false,
            }
        );
        let t = parse("rediss+sentinel://:pw@h:1/m").unwrap().unwrap();
        assert_eq!(
            (t.tls, t.user, t.password, t.db),
            (true, None, Some("pw".into()), 0)
        );
        assert!(parse("redis://h:1/0").is_none());
    }

    #[test]
    fn credentials_are_escaped_both_ways() {
        let raw = "p@ss:wörd/%";
        assert_eq!(percent_decode(&percent_encode(raw)).as_deref(), Some(raw));
    }

    #[test]
    fn bad_sentinel_urls_are_refused_with_the_expected_form() {
        for bad in [
            "redis+sentinel://h:1",
            "redis+sentinel://h:1/",
            "redis+sentinel://h/m",
            "redis+sentinel://h:x/m",
            "redis+sentinel://h:1/m/x",
            "redis+sentinel://h:1/m/0/extra",
        ] {
            let e = parse(bad).unwrap().unwrap_err();
            assert!(
                e.is_invalid() && e.to_string().contains("MASTER_NAME"),
                "{bad}: {e}"
            );
        }
    }
}
