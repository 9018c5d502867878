//! Errors are classified once, here: malformed or oversized bodies are HTTP 400 with
//! `{"error": "..."}`; evaluation failures go into the extender's `Error` field instead.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use futures::StreamExt;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("request body exceeds {limit} bytes")]
    TooLarge { limit: usize },
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("reading request body: {0}")]
    Read(String),
    #[error("{0}")]
    BadRequest(String),
    /// This replica cannot answer now (a follower); the caller should try again.
    #[error("{0}")]
    Unavailable(String),
}

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        match self {
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        }
    }
    fn error_response(&self) -> HttpResponse {
        // The caller sent something unreadable: worth a look, not an error of this scheduler.
        tracing::warn!(status = self.status_code().as_u16(), error = %self, "request refused");
        HttpResponse::build(self.status_code()).json(serde_json::json!({ "error": self.to_string() }))
    }
}

/// The whole body of a JSON request: more than `limit` bytes, or nothing but whitespace, is a 400.
pub async fn read_json_body(payload: actix_web::web::Payload, limit: usize) -> Result<actix_web::web::Bytes, Error> {
    let body = read_body(payload, limit).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::BadRequest("empty request body".into()));
    }
    Ok(body)
}

/// Reads the whole body, refusing more than `limit` bytes without buffering them.
pub async fn read_body(mut payload: actix_web::web::Payload, limit: usize) -> Result<actix_web::web::Bytes, Error> {
    let mut buf = actix_web::web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Error::Read(e.to_string()))?;
        if buf.len() + chunk.len() > limit {
            return Err(Error::TooLarge { limit });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
