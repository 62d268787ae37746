//! The Rust side of the example: the handler of the `resize` jobs a
//! Python service posts with taskflow.

use jobworker::{HandlerError, JobContext};
use serde::{Deserialize, Serialize};

/// A taskflow job's `details`: taskflow has no `args`, so a handler of a
/// job it posted gets the whole `details` map as its arguments.
#[derive(Debug, Serialize, Deserialize)]
pub struct Resize {
    /// The image to resize.
    pub path: String,
    /// The width to resize it to.
    pub width: u32,
}

/// "Resizes" the image: writes `<path>.<width>px` next to it (a stand-in
/// for the real work). A missing image is retried (it may not be uploaded
/// yet) until the job's tries are used up (a job taskflow posted has the
/// board's default, 5); a width of 0 can never work and goes to the trash.
#[jobworker::handler(queue = "images", timeout = "1m")]
pub async fn resize(cx: JobContext, args: Resize) -> Result<(), HandlerError> {
    if args.width == 0 {
        return Err(HandlerError::fatal(format!("width 0 for {}", args.path)));
    }
    let image = std::fs::read(&args.path)?;
    let out = format!("{}.{}px", args.path, args.width);
    std::fs::write(&out, format!("{} bytes at {}px", image.len(), args.width))?;
    cx.log(&format!("resized {} for taskflow", args.path));
    Ok(())
}
