//! What a replay may change, as `redial jobs replay` and `redial dead-letters replay` take it,
//! and a dry run's preview for people.

use crate::cli_args;
use crate::human::{self, say};
use redial_client::{ReplayPatch, ReplayPatchHeaders, ReplayPatchUrlPrefix, ReplayPreview};

#[derive(Debug, Default, clap::Args)]
pub struct PatchArgs {
    /// Replace the request's URL.
    #[arg(long, conflicts_with = "url_prefix")]
    url: Option<String>,
    /// Replace the start of the request's URL: OLD=NEW (a job whose URL does not start with OLD
    /// is skipped).
    #[arg(long, value_name = "OLD=NEW", value_parser = prefix)]
    url_prefix: Option<(String, String)>,
    /// Set a request header, 'Name: value', replacing every header of that name; repeat for
    /// more.
    #[arg(long = "set-header", value_name = "NAME: VALUE", value_parser = cli_args::header)]
    set_headers: Vec<(String, String)>,
    /// Remove a request header; repeat for more.
    #[arg(long = "remove-header", value_name = "NAME")]
    remove_headers: Vec<String>,
    /// Replace the request's body (sent as is).
    #[arg(long, conflicts_with = "no_body")]
    body: Option<String>,
    /// Send no body.
    #[arg(long)]
    no_body: bool,
    /// Replace the request's timeout, with a unit: 10s.
    #[arg(long)]
    timeout: Option<String>,
    /// Move the job to this queue.
    #[arg(long)]
    to_queue: Option<String>,
    /// Move the job to this endpoint (without it, a job whose endpoint is its URL's origin
    /// follows a new URL).
    #[arg(long)]
    to_endpoint: Option<String>,
    /// Send it with this credentials profile of the server's configuration
    /// ([credentials.NAME]) instead of its endpoint's (with --remove-header for the header it
    /// carried itself).
    #[arg(long, value_name = "NAME", conflicts_with = "endpoint_credentials")]
    credentials: Option<String>,
    /// Send it with its endpoint's credentials again: the profile it names is removed.
    #[arg(long)]
    endpoint_credentials: bool,
    /// Give the job a new idempotency key, for a first request that was wrong and must count
    /// as new. Without it the job keeps its key, so the provider drops a repeat.
    #[arg(long)]
    pub renew_key: bool,
    /// Show what would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn prefix(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((from, to)) if !from.is_empty() => Ok((from.to_owned(), to.to_owned())),
        _ => Err(format!(
            "{s:?} is not OLD=NEW: write the start of the URL to replace, '=', and what replaces it"
        )),
    }
}

impl PatchArgs {
    /// The patch, when it changes anything.
    pub fn patch(&self) -> Option<ReplayPatch> {
        let headers =
            (!self.set_headers.is_empty() || !self.remove_headers.is_empty()).then(|| {
                ReplayPatchHeaders {
                    set: (!self.set_headers.is_empty()).then(|| {
                        serde_json::Value::Object(
                            self.set_headers
                                .iter()
                                .map(|(n, v)| (n.clone(), serde_json::Value::String(v.clone())))
                                .collect(),
                        )
                    }),
                    remove: (!self.remove_headers.is_empty()).then(|| self.remove_headers.clone()),
                }
            });
        let body = match (&self.body, self.no_body) {
            (Some(b), _) => Some(serde_json::Value::String(b.clone())),
            (None, true) => Some(serde_json::Value::Null),
            (None, false) => None,
        };
        let patch = ReplayPatch {
            url: self.url.clone(),
            url_prefix: self
                .url_prefix
                .as_ref()
                .map(|(from, to)| ReplayPatchUrlPrefix {
                    from: from.clone(),
                    to: to.clone(),
                }),
            headers,
            body,
            timeout: self.timeout.clone(),
            policy: None,
            queue: self.to_queue.clone(),
            endpoint: self.to_endpoint.clone(),
            credentials: match (&self.credentials, self.endpoint_credentials) {
                (Some(name), _) => Some(Some(name.clone())),
                (None, true) => Some(None),
                (None, false) => None,
            },
        };
        (patch != ReplayPatch::default()).then_some(patch)
    }

    /// The key choice, when it renews.
    pub fn key(&self) -> Option<redial_client::KeyChoice> {
        self.renew_key.then_some(redial_client::KeyChoice::Renew)
    }

    /// Whether it asks for any change.
    pub fn changes(&self) -> bool {
        self.renew_key || self.patch().is_some()
    }
}

/// A dry run for people: each job shown, before and after, then what it would do.
pub fn say_preview(p: &ReplayPreview) {
    for item in &p.preview {
        say!("job {}", item.id);
        if item.changed.is_empty() {
            say!("  nothing changes: replayed as it was");
        }
        for line in &item.changed {
            say!("  {}", human::printable(line));
        }
    }
    let shown = p.preview.len() as i64;
    let more = if p.affected > shown {
        format!(" ({} shown)", human::thousands(shown.max(0) as u64))
    } else {
        String::new()
    };
    say!(
        "dry run: {} dead jobs would be replayed{more}, {} skipped (the patch is not for them), of {} matched; nothing was changed",
        human::thousands(p.affected.max(0) as u64),
        human::thousands(p.skipped.max(0) as u64),
        human::thousands(p.matched.max(0) as u64)
    );
}
