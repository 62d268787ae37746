//! The routes tested as an application's: requests sent to the router, and
//! what they posted asserted against a private `redis-server`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use jobworker::testing::{posted_during, TestBoard};
use tower::ServiceExt;
use web_service_jobs::{Welcome, EMAILS};

fn signup(email: &str) -> Request<Body> {
    Request::post("/signup")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("email={email}")))
        .unwrap()
}

#[tokio::test]
async fn signing_up_posts_one_welcome_job() {
    let test = TestBoard::start().await.unwrap();
    let app = web_service_app::router(test.any());
    let request = app.clone().oneshot(signup("ada%40example.com"));
    let (response, posted) = posted_during(test.board(), &[EMAILS], request).await.unwrap();
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let want = Welcome {
        email: "ada@example.com".into(),
    };
    let job = posted.assert_posted(EMAILS, "welcome", &want);
    posted.assert_none(EMAILS, "digest");

    let state = app
        .oneshot(
            Request::get(format!("/jobs/{}", job.id))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(state.status(), StatusCode::OK);
    let body = axum::body::to_bytes(state.into_body(), 1 << 16).await.unwrap();
    assert_eq!(&body[..], br#"{"state":"ready"}"#);
}

#[tokio::test]
async fn an_unknown_job_is_not_found() {
    let test = TestBoard::start().await.unwrap();
    let app = web_service_app::router(test.any());
    let request = Request::get("/jobs/no-such-job").body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}
