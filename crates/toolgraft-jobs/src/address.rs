//! A server's address as errors and logs show it: without the credentials a
//! URL may carry (errors reach callers, MCP clients among them), shortened.

/// A tier's URL without its credentials (`redis://:secret@host` shows as
/// `redis://host`) and its query (`?password=..` is one), shortened.
pub(crate) fn server_of(url: &str) -> String {
    let Some((scheme, _)) = url.split_once("://") else {
        return toolgraft::error::shorten(url).into_owned();
    };
    toolgraft::error::shorten(&format!("{scheme}://{}", shown(url))).into_owned()
}

/// The host and port of a URL, without the credentials before them (the
/// Redis stores name their server so).
#[cfg(feature = "redis")]
pub(crate) fn host_of(url: &str) -> &str {
    shown(url).split('/').next().unwrap_or_default()
}

/// A URL's host, port and path: after its scheme, after the credentials (a
/// password may hold a `/`, `?` or `#`: the host is after the last `@`), before
/// its query and fragment.
fn shown(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    rest.split(['?', '#']).next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// Errors name the server, never the password in its URL.
    #[test]
    fn a_url_is_shown_without_its_credentials() {
        assert_eq!(
            super::server_of("redis://:hunter2@cache:6379/0"),
            "redis://cache:6379/0"
        );
        assert_eq!(
            super::server_of("redis://user:hunter2@cache"),
            "redis://cache"
        );
        assert_eq!(
            super::server_of("postgres://jobs:hunter2@db:5432/jobs?password=hunter2"),
            "postgres://db:5432/jobs"
        );
        assert_eq!(
            super::server_of("postgres://db?password=hunter2"),
            "postgres://db"
        );
        assert_eq!(
            super::server_of("redis://u:a/b?c#d@cache:6379/1"),
            "redis://cache:6379/1"
        );
        assert_eq!(
            super::server_of("sqlite:///var/jobs.db"),
            "sqlite:///var/jobs.db"
        );
    }
}
