//! Who may act: without credentials the app is read-only; with a user and
//! password (hashed with Argon2 at start; the plain password is not kept)
//! or a bearer token, every action needs them. A browser signs in once
//! (`/login`) and gets a session cookie (HttpOnly, SameSite=Strict); a
//! script sends `Authorization: Basic …` or `Bearer …`. Actions made with
//! the cookie also need the page's CSRF token; all are refused when the
//! request says it comes from another site.

use std::collections::HashSet;
use std::sync::Mutex;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::http::HeaderMap;
use base64::Engine;

use crate::error::{Error, Result};

/// The credentials `jobworker web` was started with.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials {
    /// `--auth user:password`.
    pub user_password: Option<(String, String)>,
    /// The bearer token read from `--token-env`'s variable.
    pub token: Option<String>,
}

/// The checks of the running app.
pub(crate) struct Auth {
    user: Option<(String, String)>,
    token: Option<String>,
    /// The CSRF token of this process (in every form).
    pub csrf: String,
    sessions: Mutex<HashSet<String>>,
    /// `Authorization: Basic` values already verified (Argon2 is slow on
    /// purpose; a script sends the same header every time).
    verified: Mutex<HashSet<String>>,
}

/// How a request proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Nothing (or wrong credentials).
    None,
    /// The session cookie: the form must carry the CSRF token too.
    Session,
    /// An `Authorization` header.
    Header,
}

/// The session cookie's name.
pub(crate) const SESSION_COOKIE: &str = "jw_session";

impl Auth {
    /// Hashes the password; makes the CSRF token.
    pub(crate) fn new(credentials: Option<Credentials>) -> Result<Self> {
        let credentials = credentials.unwrap_or_default();
        let user = match credentials.user_password {
            Some((user, password)) => Some((user, hash(&password)?)),
            None => None,
        };
        Ok(Auth {
            user,
            token: credentials.token,
            csrf: random_token(),
            sessions: Mutex::new(HashSet::new()),
            verified: Mutex::new(HashSet::new()),
        })
    }

    /// Whether actions are possible at all.
    pub(crate) fn enabled(&self) -> bool {
        self.user.is_some() || self.token.is_some()
    }

    /// Whether a user and password can sign in (the login form).
    pub(crate) fn has_password(&self) -> bool {
        self.user.is_some()
    }

    /// How the request proves who it is.
    pub(crate) async fn proof(&self, headers: &HeaderMap) -> Proof {
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            return if self.header_ok(auth).await {
                Proof::Header
            } else {
                Proof::None
            };
        }
        match cookie(headers, SESSION_COOKIE) {
            Some(s) if self.sessions.lock().expect("sessions").contains(&s) => Proof::Session,
            _ => Proof::None,
        }
    }

    async fn header_ok(&self, value: &str) -> bool {
        if let Some(token) = value.strip_prefix("Bearer ") {
            return self
                .token
                .as_deref()
                .is_some_and(|t| same(t.as_bytes(), token.trim().as_bytes()));
        }
        let Some(encoded) = value.strip_prefix("Basic ") else {
            return false;
        };
        if self.verified.lock().expect("verified").contains(value) {
            return true;
        }
        let Some((user, password)) = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(u, p)| (u.to_owned(), p.to_owned())))
        else {
            return false;
        };
        let ok = self.check_password(&user, &password).await;
        if ok {
            self.verified.lock().expect("verified").insert(value.to_owned());
        }
        ok
    }

    /// Checks a user and password (off the async threads: Argon2 is slow
    /// on purpose).
    pub(crate) async fn check_password(&self, user: &str, password: &str) -> bool {
        let Some((want_user, phc)) = self.user.clone() else {
            return false;
        };
        let user_ok = same(want_user.as_bytes(), user.as_bytes());
        let password = password.to_owned();
        let password_ok = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&phc)
                .map(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        user_ok && password_ok
    }

    /// Starts a session; returns its cookie value.
    pub(crate) fn open_session(&self) -> String {
        let s = random_token();
        self.sessions.lock().expect("sessions").insert(s.clone());
        s
    }

    /// Ends a session.
    pub(crate) fn close_session(&self, headers: &HeaderMap) {
        if let Some(s) = cookie(headers, SESSION_COOKIE) {
            self.sessions.lock().expect("sessions").remove(&s);
        }
    }

    /// Whether a form's CSRF token is this process's.
    pub(crate) fn csrf_ok(&self, token: &str) -> bool {
        same(self.csrf.as_bytes(), token.as_bytes())
    }
}

/// Whether the request says it comes from another site (`Sec-Fetch-Site`,
/// or an `Origin` whose host is not the `Host` asked for).
pub(crate) fn cross_site(headers: &HeaderMap) -> bool {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return true;
        }
    }
    match (header("origin"), header("host")) {
        (Some("null"), _) => true,
        (Some(origin), Some(host)) => origin.split_once("://").map(|(_, h)| h) != Some(host),
        _ => false,
    }
}

/// A cookie's value.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 244 random bits, as hex.
fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The Argon2 hash (PHC string) of a password, with a random salt.
fn hash(password: &str) -> Result<String> {
    if password.is_empty() {
        return Err(Error::invalid(
            "--auth needs a non-empty password (user:password)",
        ));
    }
    let salt = SaltString::encode_b64(uuid::Uuid::new_v4().as_bytes())
        .map_err(|e| Error::invalid(format!("cannot make a salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::invalid(format!("cannot hash the password: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn other_sites_are_told_apart() {
        assert!(!cross_site(&headers(&[("host", "127.0.0.1:7070")])));
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:7070"),
            ("origin", "http://127.0.0.1:7070")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:7070"),
            ("origin", "http://evil.example")
        ])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_site(&headers(&[("origin", "null"), ("host", "a")])));
    }

    #[tokio::test]
    async fn credentials_are_checked() {
        let auth = Auth::new(Some(Credentials {
            user_password: Some(("ops".into(), "s3cret".into())),
            token: Some("tok".into()),
        }))
        .unwrap();
        assert!(auth.enabled());
        assert!(auth.check_password("ops", "s3cret").await);
        assert!(!auth.check_password("ops", "wrong").await);
        assert!(!auth.check_password("other", "s3cret").await);
        // "ops:s3cret" and "ops:nope" in base64.
        let good = headers(&[("authorization", "Basic b3BzOnMzY3JldA==")]);
        assert_eq!(auth.proof(&good).await, Proof::Header);
        let bad = headers(&[("authorization", "Basic b3BzOm5vcGU=")]);
        assert_eq!(auth.proof(&bad).await, Proof::None);
        assert_eq!(
            auth.proof(&headers(&[("authorization", "Bearer tok")])).await,
            Proof::Header
        );
        assert_eq!(
            auth.proof(&headers(&[("authorization", "Bearer tik")])).await,
            Proof::None
        );
        let session = auth.open_session();
        let mut with_cookie = HeaderMap::new();
        with_cookie.insert(
            "cookie",
            format!("a=b; {SESSION_COOKIE}={session}").parse().unwrap(),
        );
        assert_eq!(auth.proof(&with_cookie).await, Proof::Session);
        auth.close_session(&with_cookie);
        assert_eq!(auth.proof(&with_cookie).await, Proof::None);
        assert!(auth.csrf_ok(&auth.csrf.clone()));
        assert!(!auth.csrf_ok("x"));
        assert!(!Auth::new(None).unwrap().enabled());
    }
}
