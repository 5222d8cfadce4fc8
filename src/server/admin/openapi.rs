//! The admin API's OpenAPI 3.1 description, served at `/admin/api/openapi.json` (a test checks
//! it names every admin path the router serves).

use axum::http::header;
use axum::response::IntoResponse;

pub const DOCUMENT: &str = include_str!("openapi.json");

pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}
