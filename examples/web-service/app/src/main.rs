//! The example web service on 127.0.0.1:3000, posting to the board
//! `jobworker` uses: `JOBWORKER_REDIS_URL` when set, else a Redis on
//! 127.0.0.1:6379, else the private board.

#[tokio::main]
async fn main() -> jobworker::Result<()> {
    let board = jobworker::local::connect().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000")
        .await
        .map_err(|e| jobworker::Error::io("cannot listen on 127.0.0.1:3000", e))?;
    println!("listening on http://127.0.0.1:3000");
    axum::serve(listener, web_service_app::router(board.into()))
        .await
        .map_err(|e| jobworker::Error::io("the server stopped", e))
}
