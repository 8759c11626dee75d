//! The Host and Origin allow-lists: their entries, parsed once when configured, and
//! the matching of a request's headers against them.

use std::net::Ipv6Addr;

use http::header::{HOST, ORIGIN};
use http::{HeaderMap, Uri};

use crate::error::{AllowList, GuardError, shorten};
use crate::refusal::Reason;

/// The hosts a request may name by default: the loopback names, on any port.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The origins allowed by default: pages the loopback interface serves, on any port
/// and either scheme.
pub(crate) const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// A host allow-list entry: a host, and the one port allowed (any without one).
#[derive(Clone, Debug)]
pub(crate) struct HostRule {
    host: Host,
    port: Option<u16>,
}

/// An origin allow-list entry.
#[derive(Clone, Debug)]
pub(crate) enum OriginRule {
    /// `null`: what browsers send from sandboxed frames and `file:` pages.
    Null,
    Site {
        /// Lower-cased.
        scheme: String,
        host: Host,
        /// `None` for `:*`; otherwise the port, the scheme's default when unwritten.
        port: Option<Option<u16>>,
    },
}

/// A host as entries hold it: a name, lower-cased, or an IPv6 address, which has
/// many spellings (`[::1]` is `[0:0::1]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Host {
    Name(String),
    V6(Ipv6Addr),
}

/// A host as a request names it, borrowed from the header: requests are matched
/// without copying their headers.
#[derive(Clone, Copy, Debug)]
enum HostRef<'a> {
    Name(&'a str),
    V6(Ipv6Addr),
}

impl Host {
    fn owned(host: HostRef<'_>) -> Self {
        match host {
            HostRef::Name(name) => Self::Name(name.to_ascii_lowercase()),
            HostRef::V6(ip) => Self::V6(ip),
        }
    }

    fn matches(&self, host: HostRef<'_>) -> bool {
        match (self, host) {
            (Self::Name(name), HostRef::Name(other)) => name.eq_ignore_ascii_case(other),
            (Self::V6(ip), HostRef::V6(other)) => *ip == other,
            _ => false,
        }
    }
}

impl HostRule {
    pub(crate) fn parse(entry: &str) -> Result<Self, GuardError> {
        let bare = entry.trim();
        let parsed = match bare.parse::<Ipv6Addr>() {
            // `::1` written bare, as people write it; a Host header has `[::1]`.
            Ok(ip) => Some((HostRef::V6(ip), None)),
            Err(_) => split_authority(bare),
        };
        match parsed {
            Some((host, port)) => Ok(Self {
                host: Host::owned(host),
                port,
            }),
            None => Err(bad(
                AllowList::Hosts,
                entry,
                "a host name or address, with an optional port",
            )),
        }
    }
}

impl OriginRule {
    pub(crate) fn parse(entry: &str) -> Result<Self, GuardError> {
        let trimmed = entry.trim();
        if trimmed.eq_ignore_ascii_case("null") {
            return Ok(Self::Null);
        }
        let (base, any_port) = match trimmed.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (trimmed, false),
        };
        match parse_origin(base) {
            Some((_, _, Some(_))) if any_port => None,
            Some((scheme, host, port)) => Some(Self::Site {
                port: (!any_port).then(|| port.or(default_port(scheme))),
                scheme: scheme.to_ascii_lowercase(),
                host: Host::owned(host),
            }),
            None => None,
        }
        .ok_or_else(|| {
            bad(
                AllowList::Origins,
                entry,
                "`scheme://host` with `:port` or `:*`, or `null`",
            )
        })
    }

    fn allows(&self, origin: &Origin<'_>) -> bool {
        match (self, origin) {
            (Self::Null, Origin::Null) => true,
            (Self::Site { scheme, host, port }, Origin::Site(o_scheme, o_host, o_port)) => {
                scheme.eq_ignore_ascii_case(o_scheme)
                    && host.matches(*o_host)
                    && port.is_none_or(|port| port == o_port.or(default_port(o_scheme)))
            }
            _ => false,
        }
    }
}

/// A request's `Origin`, parsed.
enum Origin<'a> {
    Null,
    Site(&'a str, HostRef<'a>, Option<u16>),
}

/// Refuses a request whose `Host` (or, in HTTP/2, `:authority`) is not allowed.
pub(crate) fn check_host(rules: &[HostRule], uri: &Uri, headers: &HeaderMap) -> Result<(), Reason> {
    let mut values = headers.get_all(HOST).iter();
    let (first, second) = (values.next(), values.next());
    let text = match (first, second) {
        (Some(_), Some(_)) => return Err(Reason::Repeated(HOST)),
        (Some(value), None) => value.to_str().map_err(|_| Reason::UnreadableHost)?,
        (None, _) => uri.authority().ok_or(Reason::NoHost)?.as_str(),
    };
    let (host, port) = split_authority(text).ok_or(Reason::UnreadableHost)?;
    let allowed = rules.iter().any(|rule| {
        rule.host.matches(host) && rule.port.is_none_or(|allowed| port == Some(allowed))
    });
    if allowed {
        Ok(())
    } else {
        Err(Reason::ForeignHost)
    }
}

/// Refuses a request with an `Origin` not allowed; one without is not a browser's
/// cross-site request and passes.
pub(crate) fn check_origin(rules: &[OriginRule], headers: &HeaderMap) -> Result<(), Reason> {
    let mut values = headers.get_all(ORIGIN).iter();
    let Some(value) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(Reason::Repeated(ORIGIN));
    }
    let origin = match value.to_str().map(str::trim) {
        Ok(text) if text.eq_ignore_ascii_case("null") => Some(Origin::Null),
        Ok(text) => parse_origin(text).map(|(scheme, host, port)| Origin::Site(scheme, host, port)),
        Err(_) => None,
    };
    match origin {
        Some(origin) if rules.iter().any(|rule| rule.allows(&origin)) => Ok(()),
        _ => Err(Reason::ForeignOrigin),
    }
}

/// `scheme://host[:port]` with nothing after the authority.
fn parse_origin(text: &str) -> Option<(&str, HostRef<'_>, Option<u16>)> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    if !scheme_ok {
        return None;
    }
    let (host, port) = split_authority(rest)?;
    Some((scheme, host, port))
}

/// `host[:port]` (RFC 3986's authority without user information): a name, an IPv4
/// address or a bracketed IPv6 address, and a port of digits (`host:` has none).
/// Anything else, user information included, is not a host.
fn split_authority(text: &str) -> Option<(HostRef<'_>, Option<u16>)> {
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let (address, rest) = inner.split_once(']')?;
        let port = match rest {
            "" => None,
            _ => Some(rest.strip_prefix(':')?),
        };
        (HostRef::V6(address.parse().ok()?), port)
    } else {
        let (name, port) = match text.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        };
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b));
        if !name_ok {
            return None;
        }
        (HostRef::Name(name), port)
    };
    let port = match port {
        None | Some("") => None,
        Some(digits) if digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(digits.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some((host, port))
}

/// The port an origin without one means (RFC 6454 §4).
fn default_port(scheme: &str) -> Option<u16> {
    if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("ws") {
        Some(80)
    } else if scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("wss") {
        Some(443)
    } else {
        None
    }
}

fn bad(list: AllowList, entry: &str, expected: &'static str) -> GuardError {
    GuardError::BadAllowListEntry {
        list,
        entry: shorten(entry),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(text: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, text.parse().unwrap());
        headers
    }

    #[test]
    fn origin_ports_are_any_exact_or_the_schemes_default() {
        let rules = [
            "https://a.example",
            "http://b.example:*",
            "http://c.example:8080",
        ]
        .map(|entry| OriginRule::parse(entry).unwrap());
        for (text, allowed) in [
            ("https://a.example", true),
            ("https://a.example:443", true),
            ("https://a.example:8443", false),
            ("http://a.example", false),
            ("http://b.example:1234", true),
            ("http://B.EXAMPLE", true),
            ("http://c.example:8080", true),
            ("http://c.example", false),
            ("http://c.example:8080/path", false),
            ("null", false),
        ] {
            assert_eq!(
                check_origin(&rules, &origin(text)).is_ok(),
                allowed,
                "{text}"
            );
        }
    }

    #[test]
    fn hosts_compare_without_case_brackets_or_spelling() {
        let rules = ["LocalHost", "::1", "example.com:8443"].map(|e| HostRule::parse(e).unwrap());
        let uri = Uri::from_static("/");
        for (host, allowed) in [
            ("localhost:1234", true),
            ("[0:0::1]:80", true),
            ("example.com:8443", true),
            ("example.com", false),
            ("localhost.", false),
            ("LOCALHOST", true),
            ("[::1]", true),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(HOST, host.parse().unwrap());
            assert_eq!(
                check_host(&rules, &uri, &headers).is_ok(),
                allowed,
                "{host}"
            );
        }
        // HTTP/2: the authority in the URI.
        let uri = Uri::from_static("http://localhost:99/mcp");
        assert!(check_host(&rules, &uri, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn hosts_that_are_not_host_and_port_are_unreadable() {
        let rules = ["localhost", "::1"].map(|e| HostRule::parse(e).unwrap());
        let uri = Uri::from_static("/");
        for host in [
            "",
            "evil@localhost",
            "localhost:80:80",
            "localhost:123456",
            "localhost:-1",
            "local host",
            "::1",
            "[::1",
            "[::1]x",
            "[nope]:1",
            "localhost/x",
            ":80",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(HOST, host.parse().unwrap());
            assert_eq!(
                check_host(&rules, &uri, &headers),
                Err(Reason::UnreadableHost),
                "{host:?}"
            );
        }
        for host in ["localhost:", "localhost:65535", "[::1]:8080"] {
            let mut headers = HeaderMap::new();
            headers.insert(HOST, host.parse().unwrap());
            assert_eq!(check_host(&rules, &uri, &headers), Ok(()), "{host:?}");
        }
    }

    #[test]
    fn entries_that_cannot_match_are_refused() {
        for entry in ["", "http://x", "a b", "x/y"] {
            assert!(HostRule::parse(entry).is_err(), "{entry}");
        }
        for entry in [
            "x.example",
            "https://x.example/",
            "https://x:1:*",
            "null:*",
            "://x",
        ] {
            assert!(OriginRule::parse(entry).is_err(), "{entry}");
        }
    }
}
