//! Secrets out of sight: which headers and query parameters are redacted wherever they are shown
//! or stored for people (attempt records, the API's job view, logs).

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Whether a header or parameter name names a secret. Matches the usual credentials by name, and
/// any name containing `token`, `secret`, `password`, `signature`, `auth`, `cookie`, `session` or
/// ending in `key` (except `idempotency-key`, which is ours and not a secret).
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n == "idempotency-key" {
        return false;
    }
    const PARTS: [&str; 8] = [
        "token",
        "secret",
        "password",
        "signature",
        "auth",
        "cookie",
        "session",
        "credential",
    ];
    PARTS.iter().any(|p| n.contains(p))
        || n.ends_with("key")
        || n.ends_with("-key")
        || n.ends_with("_key")
        || n == "sig"
}

/// Headers with secret values replaced, at most `max` of them, each value at most 256 characters.
pub fn headers(list: &[(String, String)], max: usize) -> Vec<(String, String)> {
    list.iter()
        .take(max)
        .map(|(n, v)| {
            let value = if is_secret_name(n) {
                REDACTED.to_owned()
            } else {
                truncate(v, 256).to_owned()
            };
            (n.clone(), value)
        })
        .collect()
}

/// The URL with the values of secret-looking query parameters and any user info replaced.
pub fn url(raw: &str) -> String {
    let Ok(mut u) = url::Url::parse(raw) else {
        return raw.to_owned();
    };
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username(REDACTED);
        let _ = u.set_password(None);
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_name(&k) {
                    REDACTED.to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// At most `max` characters of `s`, cut on a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "Authorization",
            "Proxy-Authorization",
            "Cookie",
            "Set-Cookie",
            "X-Api-Key",
            "api_key",
            "apikey",
            "X-Auth-Token",
            "client_secret",
            "X-Hub-Signature-256",
            "password",
            "access_token",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "Idempotency-Key",
            "Content-Type",
            "Retry-After",
            "x-request-id",
            "page",
            "monkey-business",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            url("https://user:pw@api.example.com/v1?api_key=abc&page=2"),
            "https://%5Bredacted%5D@api.example.com/v1?api_key=%5Bredacted%5D&page=2"
        );
        assert_eq!(
            url("https://api.example.com/v1"),
            "https://api.example.com/v1"
        );
        assert_eq!(url("not a url"), "not a url");
    }

    #[test]
    fn headers_are_bounded() {
        let long = "x".repeat(1000);
        let h = headers(
            &[
                ("a".into(), long),
                ("authorization".into(), "Bearer s".into()),
                ("c".into(), "3".into()),
            ],
            2,
        );
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].1.len(), 256);
        assert_eq!(h[1].1, REDACTED);
    }
}
