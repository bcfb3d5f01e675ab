//! Secrets out of sight: which headers and query parameters are redacted wherever they are shown
//! or stored for people (attempt records, the API's job view, logs).

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Whether a header or parameter name names a secret, on requests and responses alike: any name
/// containing `pass`, `secret`, `token`, `key`, `auth`, `signature`, `session`, `cookie` or
/// `credential`, or `sig` (except `idempotency-key`, which is ours and not a secret). Over-wide
/// on purpose: a value hidden that was not secret costs a look at the sender; a secret shown
/// costs a rotation.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    if n == "idempotency-key" {
        return false;
    }
    const PARTS: [&str; 9] = [
        "pass",
        "secret",
        "token",
        "key",
        "auth",
        "signature",
        "session",
        "cookie",
        "credential",
    ];
    PARTS.iter().any(|p| n.contains(p)) || n == "sig"
}

/// Headers whose values are URLs (or, for `Link`, hold them in `<...>`): their user info and
/// secret query values are redacted as a request's URL is.
const URL_HEADERS: [&str; 4] = ["location", "content-location", "link", "refresh"];

/// Headers with secret values replaced and URLs in them redacted, at most `max` of them, each
/// value at most 256 characters.
pub fn headers(list: &[(String, String)], max: usize) -> Vec<(String, String)> {
    list.iter()
        .take(max)
        .map(|(n, v)| (n.clone(), header_value(n, v)))
        .collect()
}

/// A header's value as it may be shown or stored: a secret's replaced, a URL's redacted, cut
/// to 256 characters.
pub fn header_value(name: &str, value: &str) -> String {
    if is_secret_name(name) {
        return REDACTED.to_owned();
    }
    let n = name.to_ascii_lowercase();
    if !URL_HEADERS.contains(&n.as_str()) {
        return truncate(value, 256).to_owned();
    }
    // Redacted whole before it is cut, so a cut cannot leave half a secret unrecognised.
    let redacted = if n == "link" || n == "refresh" {
        urls_within(value)
    } else {
        url(value.trim())
    };
    truncate(&redacted, 256).to_owned()
}

/// `value` with each URL in it redacted: those in `<...>` (`Link`) and one after `url=`
/// (`Refresh`).
fn urls_within(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        out.push_str(&rest[..=open]);
        out.push_str(&url(&rest[open + 1..open + close]));
        out.push('>');
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    match out.to_ascii_lowercase().find("url=") {
        Some(at) if !out.contains('<') => {
            let (head, target) = out.split_at(at + 4);
            format!("{head}{}", url(target.trim()))
        }
        _ => out,
    }
}

/// The URL with the values of secret-looking query parameters and any user info replaced.
pub fn url(raw: &str) -> String {
    let Ok(mut u) = url::Url::parse(raw) else {
        return relative_url(raw);
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

/// A relative URL (a `Location: /next?token=...`) with its secret query values replaced; text
/// that is no URL at all, as it is.
fn relative_url(raw: &str) -> String {
    const BASE: &str = "http://relative.invalid";
    let Ok(base) = url::Url::parse(BASE) else {
        return raw.to_owned();
    };
    let Ok(u) = base.join(raw) else {
        return raw.to_owned();
    };
    if u.query().is_none() {
        return raw.to_owned();
    }
    let redacted = url(u.as_str());
    match redacted.strip_prefix(BASE) {
        Some(rest) if raw.starts_with('/') => rest.to_owned(),
        Some(rest) => rest.trim_start_matches('/').to_owned(),
        None => redacted,
    }
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
            "X-Webhook-Pass",
            "X-Upstream-Pass",
            "X-Session-Id",
            "x-amz-security-token",
            "monkey-business",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "Idempotency-Key",
            "Content-Type",
            "Retry-After",
            "x-request-id",
            "page",
            "Location",
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
    fn urls_in_response_headers_are_redacted() {
        let h = headers(
            &[
                (
                    "Location".into(),
                    "https://user:PW@api.example.com/next?token=t0k&page=2".into(),
                ),
                (
                    "Link".into(),
                    "<https://api.example.com/p?page=2&access_token=t0k>; rel=\"next\", <https://a:b@api.example.com/>; rel=\"first\"".into(),
                ),
                ("Refresh".into(), "5; url=https://x.example.com/?sig=abc".into()),
                ("Content-Location".into(), "/relative?api_key=k".into()),
            ],
            10,
        );
        for (name, value) in &h {
            for secret in ["PW", "t0k", "a:b", "sig=abc"] {
                assert!(!value.contains(secret), "{name}: {value}");
            }
        }
        assert_eq!(
            h[0].1,
            "https://%5Bredacted%5D@api.example.com/next?token=%5Bredacted%5D&page=2"
        );
        assert!(h[1].1.ends_with("; rel=\"first\""), "{}", h[1].1);
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
