//! The one network path a guest has: an HTTP request to a host (and port) the operator allowed
//! for its adapter, every redirect hop checked against the same list, bounded to 30 s and 4 MiB.
//! The guest's call is suspended meanwhile (an async import), so the runtime worker keeps serving.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_BODY: usize = 4 << 20;
const MAX_REDIRECTS: usize = 5;

/// Why `url` may not be reached with `allow_hosts`, or `None` when it may.
pub fn denial(allow_hosts: &[String], url: &Url) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Some(format!("`{url}` is not an http(s) URL"));
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default();
    let allowed = allow_hosts.iter().any(|entry| {
        let (name, entry_port) = split_entry(entry);
        name.eq_ignore_ascii_case(host)
            && match entry_port {
                Some(p) => port == Some(p),
                None => matches!(port, Some(80 | 443)),
            }
    });
    (!allowed).then(|| match port {
        Some(p) if p != 80 && p != 443 => format!("HTTP to {host} port {p} is denied"),
        _ => format!("HTTP to {host} is denied"),
    })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_entry(entry: &str) -> (&str, Option<u16>) {
    let (name, port) = match entry.rsplit_once(':') {
        Some((name, port)) if (!name.contains(':') || name.ends_with(']')) && port.parse::<u16>().is_ok() => {
            (name, port.parse().ok())
        }
        _ => (entry, None),
    };
    (name, port)
}

/// (status, body) or why it failed or was denied.
pub async fn run(
    allow_hosts: Arc<[String]>,
    method: &str,
    url: &str,
    body: Option<String>,
) -> Result<(u16, String), String> {
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| format!("`{method}` is not a method"))?;
    let url = Url::parse(url).map_err(|_| format!("`{url}` is not an http(s) URL"))?;
    if let Some(denied) = denial(&allow_hosts, &url) {
        return Err(denied);
    }
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        match denial(&allow_hosts, attempt.url()) {
            Some(denied) => attempt.error(format!("redirected to a host that is not allowed: {denied}")),
            None => attempt.follow(),
        }
    });
    let client = crate::http_client::builder().timeout(TIMEOUT).redirect(policy).build().map_err(|e| e.to_string())?;
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    let mut response = request.send().await.map_err(|e| format!("request failed: {}", chain(&e)))?;
    let status = response.status().as_u16();
    let bytes = crate::http_client::read_bounded(&mut response, MAX_BODY).await?;
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// An error and its causes, one line (a redirect policy's own message is a cause).
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(allow: &[&str], url: &str) -> bool {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        denial(&allow, &Url::parse(url).unwrap()).is_some()
    }

    #[test]
    fn a_host_is_allowed_on_80_and_443_unless_its_entry_names_a_port() {
        assert!(!denied(&["auth.example"], "https://auth.example/token"));
        assert!(!denied(&["auth.example"], "http://AUTH.example/token"));
        assert!(denied(&["auth.example"], "http://auth.example:8080/token"));
        assert!(!denied(&["auth.example:8080"], "http://auth.example:8080/token"));
        assert!(denied(&["auth.example:8080"], "https://auth.example/token"));
        assert!(!denied(&["[::1]:9000"], "http://[::1]:9000/"));
        assert!(denied(&["auth.example"], "ftp://auth.example/"));
        assert!(denied(&["auth.example"], "https://evil.example/"));
        assert!(denied(&[], "https://auth.example/"));
    }
}
