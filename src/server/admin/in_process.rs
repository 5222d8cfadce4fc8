//! The admin API called in-process with the admin token: the same routes, checks and logs as
//! an HTTP admin client, for the Telegram bot (acting for its user) and the alert watcher.

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::Value;
use tower::ServiceExt;

/// Largest admin answer read (health of many slots is a few hundred KB at most).
const MAX_ADMIN_BYTES: usize = 8 << 20;

/// The admin API, called in-process with the admin token.
#[derive(Clone)]
pub struct InProcess {
    router: axum::Router,
    token: String,
    /// The Telegram user the calls are made for (the audit trail's actor).
    user: Option<i64>,
}

impl InProcess {
    pub fn new(router: axum::Router, token: String) -> InProcess {
        InProcess { router, token, user: None }
    }

    /// The same API, acting for a Telegram user (with `access.telegram_role`).
    pub fn for_telegram_user(&self, user: i64) -> InProcess {
        InProcess { user: Some(user), ..self.clone() }
    }

    /// (status, JSON answer) of one admin call.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("/admin/api{path}"))
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .expect("a well-formed admin request");
        if let Some(user) = self.user {
            request.extensions_mut().insert(super::TelegramUser(user));
        }
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ADMIN_BYTES).await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// A GET's answer when it succeeded.
    pub async fn get(&self, path: &str) -> Option<Value> {
        match self.call(Method::GET, path, None).await {
            (200, value) => Some(value),
            _ => None,
        }
    }
}
