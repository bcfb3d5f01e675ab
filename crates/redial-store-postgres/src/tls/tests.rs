//! How the URL's and the environment's settings are read, without a server.

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn the_tls_settings_leave_the_url_and_the_url_wins_over_the_environment() {
    let (rest, found) = split_ssl_settings(
        "postgres://u:p%40ss@db:5432/app?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
    )
    .expect("splits");
    assert_eq!(rest, "postgres://u:p%40ss@db:5432/app?application_name=x");
    assert_eq!(
        found,
        vec![
            ("sslmode".into(), "verify-full".into()),
            ("sslrootcert".into(), "/etc/ca.pem".into())
        ]
    );
    let (rest, found) =
        split_ssl_settings("host=db sslmode = require user='a b' sslkey='/k\\'s'").expect("splits");
    assert_eq!(rest, "host=db user='a b'");
    assert_eq!(
        found,
        vec![
            ("sslmode".into(), "require".into()),
            ("sslkey".into(), "/k's".into())
        ]
    );
    let env = |name: &str| (name == "PGSSLMODE").then(|| "disable".to_owned());
    let c = DbConfig::parse_with("postgres://db/app", &env).expect("parses");
    assert_eq!(c.ssl_mode(), SslMode::Disable);
    let c = DbConfig::parse_with("postgres://db/app?sslmode=require", &env).expect("parses");
    assert_eq!(c.ssl_mode(), SslMode::Require);
    let c = DbConfig::parse_with("postgres://db/app", &no_env).expect("parses");
    assert_eq!(c.ssl_mode(), SslMode::Prefer, "libpq's default");
}

#[test]
fn bad_settings_say_which_and_never_show_the_password() {
    let err = |url: &str| DbConfig::parse_with(url, &no_env).expect_err(url);
    let e = err("postgres://u:secret@db/app?sslmode=verify");
    assert!(e.contains("sslmode=verify is not one of"), "{e}");
    let e = err("postgres://u:secret@db/app?sslmode=verify-full");
    assert!(e.contains("set sslrootcert"), "{e}");
    let e = err("postgres://u:secret@db/app?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem");
    assert!(e.starts_with("sslrootcert (/nonexistent/ca.pem)"), "{e}");
    let e = err("postgres://u:secret@db/app?sslcert=/c.pem");
    assert!(e.contains("sslkey is not"), "{e}");
    let e = err("postgres://u:secret@db:notaport/app");
    assert!(e.starts_with("invalid database URL"), "{e}");
    for e in [
        err("postgres://u:secret@db/app?sslmode=verify"),
        err("postgres://u:secret@db:notaport/app"),
    ] {
        assert!(!e.contains("secret"), "{e}");
    }
    let c = DbConfig::parse_with(
        "postgres://u:secret@db/app?sslmode=verify-full&sslrootcert=system",
        &no_env,
    )
    .expect("the bundled roots");
    assert!(!format!("{c:?}").contains("secret"), "{c:?}");
}
