//! `[http]`: the REST listener and whom it serves from a browser. `http = "ADDR"` (the listen
//! address alone) is accepted as the short form of `[http] listen = "ADDR"`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpConfig {
    /// REST listen address of the router.
    pub listen: SocketAddr,
    /// Web origins (`https://app.example.com`, as browsers send them in `Origin`) whose requests
    /// are served, with CORS headers. A request with any other `Origin` is refused
    /// (`ORIGIN_NOT_ALLOWED`); `null` is never allowed. Empty: no browser page may call the API.
    pub allowed_origins: Vec<String>,
    /// Host names, besides IP literals, `localhost` and `*.localhost`, under which requests without
    /// a bearer token are served (`HOST_NOT_ALLOWED` otherwise: a page whose name was rebound to
    /// this address cannot use the tokenless access meant for local use).
    pub allowed_hosts: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".parse().expect("valid default"),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// The table form of `[http]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HttpTable {
    listen: SocketAddr,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
}

impl Default for HttpTable {
    fn default() -> Self {
        let HttpConfig {
            listen,
            allowed_origins,
            allowed_hosts,
        } = HttpConfig::default();
        Self {
            listen,
            allowed_origins,
            allowed_hosts,
        }
    }
}

impl<'de> Deserialize<'de> for HttpConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HttpVisitor)
    }
}

struct HttpVisitor;

impl<'de> Visitor<'de> for HttpVisitor {
    type Value = HttpConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a listen address such as \"127.0.0.1:8080\" or an [http] table")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<HttpConfig, E> {
        let listen = value
            .parse()
            .map_err(|_| E::invalid_value(de::Unexpected::Str(value), &self))?;
        Ok(HttpConfig {
            listen,
            ..HttpConfig::default()
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HttpConfig, A::Error> {
        let table = HttpTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(HttpConfig {
            listen: table.listen,
            allowed_origins: table.allowed_origins,
            allowed_hosts: table.allowed_hosts,
        })
    }
}

impl HttpConfig {
    /// Pushes one message per invalid key of `[http]`, each starting with the key path.
    pub(super) fn validate(&self, errors: &mut Vec<String>) {
        for (i, origin) in self.allowed_origins.iter().enumerate() {
            if let Err(problem) = normalize_origin(origin) {
                errors.push(format!("http.allowed_origins[{i}]: {problem}"));
            }
        }
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            if let Err(problem) = normalize_host(host) {
                errors.push(format!("http.allowed_hosts[{i}]: {problem}"));
            }
        }
    }
}

/// An origin as browsers serialize it: `scheme://host[:port]`, lowercase, without the scheme's
/// default port. `Err` says what is wrong with `origin`.
pub fn normalize_origin(origin: &str) -> Result<String, String> {
    let lower = origin.trim().to_ascii_lowercase();
    if lower == "null" {
        return Err("`null` (sandboxed pages, files) is never allowed".into());
    }
    if lower.contains('*') {
        return Err("wildcards are not supported: list each origin".into());
    }
    let (scheme, authority) = lower.split_once("://").ok_or_else(|| {
        format!("must be scheme://host[:port], such as https://app.example.com, got `{origin}`")
    })?;
    let default_port = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return Err(format!("the scheme must be http or https, got `{origin}`")),
    };
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return Err(format!(
            "must be scheme://host[:port] without a path, such as https://app.example.com, got `{origin}`"
        ));
    }
    let (host, port) =
        split_port(authority).ok_or_else(|| format!("has an invalid port, got `{origin}`"))?;
    if normalize_host(host.trim_start_matches('[').trim_end_matches(']')).is_err() {
        return Err(format!("has an invalid host, got `{origin}`"));
    }
    Ok(match port {
        Some(port) if port != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// A host name (or IP address) without a port, lowercase. `Err` says what is wrong with `host`.
pub fn normalize_host(host: &str) -> Result<String, String> {
    let lower = host.trim().trim_end_matches('.').to_ascii_lowercase();
    if lower.parse::<IpAddr>().is_ok() {
        return Ok(lower);
    }
    let valid = !lower.is_empty()
        && lower.len() <= 253
        && lower.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if valid {
        Ok(lower)
    } else {
        Err(format!(
            "must be a host name without a port or wildcard, such as search.example.com, got `{host}`"
        ))
    }
}

/// `host[:port]` or `[v6][:port]` split into host and port; `None` when the port is not a number.
pub fn split_port(authority: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let rest = &authority[end + 1..];
        match rest.strip_prefix(':') {
            Some(port) => (&authority[..=end], Some(port)),
            None if rest.is_empty() => (authority, None),
            None => return None,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    match port {
        Some(port) if port.parse::<u16>().is_err() => None,
        _ => Some((host, port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised_or_refused() {
        assert_eq!(
            normalize_origin("HTTPS://App.Example.com").unwrap(),
            "https://app.example.com"
        );
        assert_eq!(
            normalize_origin("https://app.example.com:443").unwrap(),
            "https://app.example.com"
        );
        assert_eq!(
            normalize_origin("http://localhost:3000").unwrap(),
            "http://localhost:3000"
        );
        assert_eq!(
            normalize_origin("http://[::1]:3000").unwrap(),
            "http://[::1]:3000"
        );
        for bad in [
            "null",
            "*",
            "https://*.example.com",
            "app.example.com",
            "ftp://app.example.com",
            "https://app.example.com/",
            "https://app.example.com:99999",
            "https://",
        ] {
            assert!(normalize_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_are_names_or_addresses() {
        assert_eq!(
            normalize_host("Search.Example.com.").unwrap(),
            "search.example.com"
        );
        assert_eq!(normalize_host("10.0.0.5").unwrap(), "10.0.0.5");
        for bad in [
            "",
            "search.example.com:8080",
            "*.example.com",
            "a..b",
            "-a.com",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_split() {
        assert_eq!(split_port("a.com:80"), Some(("a.com", Some("80"))));
        assert_eq!(split_port("a.com"), Some(("a.com", None)));
        assert_eq!(split_port("[::1]:80"), Some(("[::1]", Some("80"))));
        assert_eq!(split_port("[::1]"), Some(("[::1]", None)));
        assert_eq!(split_port("a.com:x"), None);
        assert_eq!(split_port("[::1]x"), None);
    }
}
