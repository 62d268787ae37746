//! The actions (POST): each checks who asks (credentials, the CSRF token
//! of a signed-in browser, and that the request does not come from another
//! site), does one thing through the board's capability traits, and
//! returns to the page it came from with a message; a script (credentials
//! in an `Authorization` header) gets the outcome as a status and a line
//! of text instead.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use crate::board::{Admin, Board};
use crate::error::{Error, Result};
use crate::job::{JobId, Priority};
use crate::web::auth::{cross_site, Proof, SESSION_COOKIE};
use crate::web::layout::{error_page, error_status};
use crate::web::state::AppState;
use crate::web::{fmt, queues};

/// The owner string of the claim the app makes to trash a job.
const TRASH_OWNER: &str = "jobworker-web";
/// The reason a job trashed from the app carries.
const TRASH_REASON: &str = "trashed by an operator (jobworker web)";

/// A submitted form: its fields in order (a name may repeat: `ids`).
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Form {
        Form(form_urlencoded::parse(body).into_owned().collect())
    }
    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }
    fn all(&self, name: &str) -> Vec<JobId> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| JobId::from(v.as_str()))
            .collect()
    }
}

/// Who asked for an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asker {
    /// A signed-in browser, sent back to its page with a message.
    Browser,
    /// A script (an `Authorization` header): the outcome is the status.
    Script,
}

/// Lets the action through (saying who asks), or the page that refuses it.
async fn admit(state: &AppState, headers: &HeaderMap, form: &Form) -> std::result::Result<Asker, Response> {
    if cross_site(headers) {
        return Err(error_page(
            StatusCode::FORBIDDEN,
            "refused: the request comes from another site",
        ));
    }
    if !state.auth.enabled() {
        return Err(error_page(
            StatusCode::FORBIDDEN,
            "refused: this app is read-only (start jobworker web with --auth user:password or --token-env VAR to enable actions)",
        ));
    }
    match state.auth.proof(headers).await {
        Proof::Header => Ok(Asker::Script),
        Proof::Session if state.auth.csrf_ok(form.get("csrf")) => Ok(Asker::Browser),
        Proof::Session => Err(error_page(
            StatusCode::FORBIDDEN,
            "refused: the form's CSRF token is missing or stale; reload the page",
        )),
        Proof::None => Err(error_page(
            StatusCode::UNAUTHORIZED,
            "refused: actions need credentials; sign in at /login",
        )),
    }
}

/// Back to the page the form was on (same site only), else `fallback`,
/// with `msg`.
fn back(headers: &HeaderMap, fallback: String, msg: &str) -> Response {
    let from_referer = headers
        .get(header::REFERER)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| r.split_once("://"))
        .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_owned()))
        .filter(|p| p.starts_with('/') && !p.starts_with("//"));
    let path = from_referer.unwrap_or(fallback);
    let path = match path.split_once("msg=") {
        Some((before, _)) => before.trim_end_matches(['&', '?']).to_owned(),
        None => path,
    };
    let sep = if path.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{path}{sep}msg={}", fmt::query(msg))).into_response()
}

/// The answer to an action that did `result`: a browser goes back to its
/// page (else `fallback`) with what it did or why not; a script gets 200
/// and what it did, or the error's status (`error_status`) and why.
fn answer(asker: Asker, headers: &HeaderMap, fallback: String, result: Result<String>) -> Response {
    match (asker, result) {
        (Asker::Browser, Ok(msg)) => back(headers, fallback, &msg),
        (Asker::Browser, Err(e)) => back(headers, fallback, &format!("failed: {e}")),
        (Asker::Script, Ok(msg)) => (StatusCode::OK, format!("{msg}\n")).into_response(),
        (Asker::Script, Err(e)) => (error_status(&e), format!("failed: {e}\n")).into_response(),
    }
}

/// `POST /act/job`: one job (op: retry, purge, cancel, trash, priority,
/// track, untrack, tag, untag).
pub(crate) async fn job(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let asker = match admit(&state, &headers, &form).await {
        Ok(asker) => asker,
        Err(refused) => return refused,
    };
    let (queue, id) = (form.get("queue"), JobId::from(form.get("id")));
    let result = job_op(&state, queue, &id, form.get("op"), form.get("value")).await;
    answer(asker, &headers, fmt::job_url(queue, id.as_str()), result)
}

async fn job_op(state: &AppState, queue: &str, id: &JobId, op: &str, value: &str) -> Result<String> {
    let b = &state.board;
    let value = value.trim();
    Ok(match op {
        "retry" => {
            first(b.retry(queue, std::slice::from_ref(id)).await?).map(|()| format!("job {id} retried"))?
        }
        "purge" => {
            first(b.purge(queue, std::slice::from_ref(id)).await?).map(|()| format!("job {id} purged"))?
        }
        "cancel" => {
            let done = b.cancel(queue, std::slice::from_ref(id), false).await?;
            format!("cancelled {} job(s)", done.len())
        }
        "trash" => {
            trash(state, queue, id).await?;
            format!("job {id} trashed")
        }
        "priority" => {
            b.set_priority(queue, id, Priority::parse(value)?).await?;
            format!("priority of job {id} set to {value}")
        }
        "track" => b.track(queue, id).await.map(|()| format!("tracking job {id}"))?,
        "untrack" => b
            .untrack(queue, id)
            .await
            .map(|()| format!("no longer tracking job {id}"))?,
        "tag" | "untag" if value.is_empty() => return Err(Error::invalid("give a tag")),
        "tag" => format!("tags: {}", b.tag(queue, id, &[value]).await?.join(", ")),
        "untag" => format!("tags: {}", b.untag(queue, id, &[value]).await?.join(", ")),
        other => return Err(Error::invalid(format!("unknown action {other:?}"))),
    })
}

/// Trashes a job nobody holds: claims it by name, then trashes the claim.
async fn trash(state: &AppState, queue: &str, id: &JobId) -> Result<()> {
    let claimed = state
        .board
        .claim_job(queue, id, TRASH_OWNER, Some(Duration::from_secs(60)))
        .await?;
    state
        .board
        .trash(claimed.lease, TRASH_REASON)
        .await
        .map_err(|u| u.into())
}

fn first(results: Vec<Result<()>>) -> Result<()> {
    results.into_iter().next().unwrap_or(Ok(()))
}

/// `POST /act/jobs`: the jobs selected on a page (op: retry, purge,
/// cancel, trash).
pub(crate) async fn jobs(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let asker = match admit(&state, &headers, &form).await {
        Ok(asker) => asker,
        Err(refused) => return refused,
    };
    let (queue, op, ids) = (form.get("queue"), form.get("op"), form.all("ids"));
    let mut done = 0;
    let mut errors = Vec::new();
    for id in &ids {
        match job_op(&state, queue, id, op, "").await {
            Ok(_) => done += 1,
            Err(e) => errors.push((id, e)),
        }
    }
    let mut msg = format!("{op}: {done} of {} selected job(s)", ids.len());
    // A script reads the worst failure's status (the board's over a
    // refusal); a partial success is not a 200, its text says "k of n".
    let worst = errors.iter().map(|(_, e)| e).max_by_key(|e| error_status(e));
    let result = match worst {
        None => Ok(msg),
        Some(worst) => {
            let each: Vec<String> = errors.iter().map(|(id, e)| format!("{id}: {e}")).collect();
            msg += &format!("; {}", each.join("; "));
            Err(Error::new(worst.kind().clone(), msg))
        }
    };
    answer(asker, &headers, fmt::queue_url(queue), result)
}

/// `POST /act/queue`: pause, resume, limit.
pub(crate) async fn queue(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let asker = match admit(&state, &headers, &form).await {
        Ok(asker) => asker,
        Err(refused) => return refused,
    };
    let queue = form.get("queue");
    let b = &state.board;
    let result = match form.get("op") {
        "pause" => b.pause(queue).await.map(|()| format!("queue {queue} paused")),
        "resume" => b.resume(queue).await.map(|()| format!("queue {queue} resumed")),
        "limit" => match form.get("value").trim() {
            "" | "0" => b
                .set_limit(queue, None)
                .await
                .map(|()| format!("queue {queue}: no limit")),
            v => match v.parse::<u32>() {
                Ok(n) => b
                    .set_limit(queue, Some(n))
                    .await
                    .map(|()| format!("queue {queue}: limit {n}")),
                Err(_) => Err(Error::invalid(format!("limit {v:?} is not a number"))),
            },
        },
        other => Err(Error::invalid(format!("unknown action {other:?}"))),
    };
    answer(asker, &headers, fmt::queue_url(queue), result)
}

/// `POST /act/failed`: retry or purge the selected jobs (`ids`), else
/// everything matching the filter: a queue (empty: every queue) and a
/// group (empty: every group).
pub(crate) async fn failed(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let asker = match admit(&state, &headers, &form).await {
        Ok(asker) => asker,
        Err(refused) => return refused,
    };
    let purge = match form.get("op") {
        "retry" => false,
        "purge" => true,
        other => {
            let unknown = Error::invalid(format!("unknown action {other:?}"));
            return answer(asker, &headers, "/failed".into(), Err(unknown));
        }
    };
    let verb = if purge { "purged" } else { "retried" };
    let (queue, group) = (form.get("queue"), form.get("group").trim());
    let result = settle(&state, queue, (!group.is_empty()).then_some(group), purge)
        .await
        .map(|n| format!("{verb} {n} job(s)"));
    answer(asker, &headers, "/failed".into(), result)
}

async fn settle(state: &AppState, queue: &str, group: Option<&str>, purge: bool) -> Result<usize> {
    let all = if queue.is_empty() {
        queues::known(state).await?
    } else {
        vec![queue.to_owned()]
    };
    let mut n = 0;
    for q in &all {
        n += state.board.settle_failed(q, group, purge).await?;
    }
    Ok(n)
}

/// `POST /login`: a user and password for a session cookie.
pub(crate) async fn login(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    if cross_site(&headers) || !state.auth.csrf_ok(form.get("csrf")) {
        return error_page(
            StatusCode::FORBIDDEN,
            "refused: reload the sign-in page and try again",
        );
    }
    if !state
        .auth
        .check_password(form.get("user"), form.get("password"))
        .await
    {
        return error_page(StatusCode::UNAUTHORIZED, "wrong user or password");
    }
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        state.auth.open_session()
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/?msg=signed%20in")).into_response()
}

/// `POST /logout`.
pub(crate) async fn logout(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let form = Form::parse(&body);
    if cross_site(&headers) || !state.auth.csrf_ok(form.get("csrf")) {
        return error_page(StatusCode::FORBIDDEN, "refused: reload the page and try again");
    }
    state.auth.close_session(&headers);
    let cookie = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/?msg=signed%20out")).into_response()
}
