//! The example web service: `POST /signup` (a form with `email`) posts a
//! `welcome` job and answers 202 with its id; `GET /jobs/{id}` answers the
//! job's state. The board is the app's state: any [`Board`] of any backend.

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use jobworker::{AnyBoard, Board, JobId};
use serde::Deserialize;
use serde_json::{json, Value};
use web_service_jobs::{welcome, Welcome, EMAILS};

/// The signup form.
#[derive(Debug, Deserialize)]
pub struct Signup {
    /// The new user's address.
    pub email: String,
}

/// The service's routes, posting to `board`.
pub fn router(board: AnyBoard) -> Router {
    Router::new()
        .route("/signup", post(signup))
        .route("/jobs/{id}", get(job_state))
        .with_state(board)
}

async fn signup(State(board): State<AnyBoard>, Form(form): Form<Signup>) -> (StatusCode, Json<Value>) {
    let args = Welcome { email: form.email };
    match welcome::post(&board, &args).await {
        Ok(id) => (StatusCode::ACCEPTED, Json(json!({ "job": id.as_str() }))),
        // The board could not take it: say so, the client may retry.
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}

async fn job_state(State(board): State<AnyBoard>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    match board.state(EMAILS, &JobId::from(id)).await {
        Ok(state) => (StatusCode::OK, Json(json!({ "state": state.as_str() }))),
        Err(e) if e.is_not_found() => (StatusCode::NOT_FOUND, Json(json!({ "error": e.to_string() }))),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}
