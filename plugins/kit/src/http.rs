//! Building upstream requests: URL joining and header lists.

/// Case-insensitive header lookup.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// `base` (no trailing slash expected, tolerated) + `path` (leading slash).
pub fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// Headers from settings written as `header.NAME: value`.
pub fn setting_headers(settings: &[(String, String)]) -> impl Iterator<Item = (String, String)> + '_ {
    settings.iter().filter_map(|(k, v)| k.strip_prefix("header.").map(|name| (name.to_string(), v.clone())))
}
