//! The content model of context search: sources, record ACLs as principal tokens, and segment
//! pointers. Shared by the router (which resolves a caller's principals and mints pointers) and
//! the shards (which filter on the tokens).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::principal;

/// Content sources a sync may come from.
pub const SOURCES: [&str; 6] = [
    "onedrive",
    "sharepoint",
    "dropbox",
    "box",
    "confluence",
    "googledrive",
];

/// Checks `value` names a known source.
pub fn parse_source(field: &str, value: &str) -> Result<String> {
    if SOURCES.contains(&value) {
        Ok(value.to_string())
    } else {
        Err(Error::invalid(
            field,
            format!(
                "`{value}` is not a source; expected one of {}",
                SOURCES.join(", ")
            ),
        ))
    }
}

/// The principal token that every caller holds.
pub const ANYONE: &str = "anyone";

/// Token of a user (an email or a provider user id), in the one form principals are compared in
/// ([`crate::principal::key`]).
pub fn user_token(user: &str) -> String {
    format!("user:{}", principal::key(user))
}

/// Token of a group of the sync's source (ids compared exactly).
pub fn group_token(group: &str) -> String {
    format!("group:{}", group.trim())
}

/// Token of an email domain, compared like principals ([`crate::principal::key`]).
pub fn domain_token(domain: &str) -> String {
    format!(
        "domain:{}",
        principal::key(domain.trim().trim_start_matches('@'))
    )
}

/// The domain of an email address, if `principal` is one.
pub fn email_domain(principal: &str) -> Option<&str> {
    let (local, domain) = principal.trim().rsplit_once('@')?;
    (!local.is_empty() && !domain.is_empty() && !domain.contains('@')).then_some(domain)
}

/// Who may read a record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Acl {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub domains: Vec<String>,
    /// Anyone with the link (or in the tenant) may read it.
    #[serde(default)]
    pub anyone: bool,
}

impl Acl {
    /// The record's principal tokens, sorted and deduplicated. A record whose ACL is empty has no
    /// tokens: nobody can read it.
    pub fn tokens(&self) -> Vec<String> {
        let mut tokens: Vec<String> = self
            .users
            .iter()
            .map(|u| user_token(u))
            .chain(self.groups.iter().map(|g| group_token(g)))
            .chain(self.domains.iter().map(|d| domain_token(d)))
            .collect();
        if self.anyone {
            tokens.push(ANYONE.to_string());
        }
        tokens.sort();
        tokens.dedup();
        tokens
    }
}

/// Where a segment is: the sync, the record, its position in the record, and a hash of its text
/// (so a pointer minted before the record changed does not silently point at other text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pointer {
    pub sync_id: String,
    pub record_id: String,
    pub ordinal: u32,
    pub text_hash: u32,
}

const POINTER_PREFIX: &str = "seg_";

impl Pointer {
    /// The opaque string form handed to clients.
    pub fn encode(&self) -> String {
        let raw = format!(
            "{}\n{}\n{}\n{:08x}",
            self.sync_id, self.record_id, self.ordinal, self.text_hash
        );
        format!("{POINTER_PREFIX}{}", base64url(raw.as_bytes()))
    }

    /// Parses a pointer; `None` for anything this service did not mint.
    pub fn decode(pointer: &str) -> Option<Pointer> {
        let bytes = unbase64url(pointer.strip_prefix(POINTER_PREFIX)?)?;
        let text = String::from_utf8(bytes).ok()?;
        let mut parts = text.splitn(4, '\n');
        let sync_id = parts.next()?.to_string();
        let record_id = parts.next()?.to_string();
        let ordinal = parts.next()?.parse().ok()?;
        let hash = parts.next()?;
        if hash.len() != 8 || sync_id.is_empty() || record_id.is_empty() {
            return None;
        }
        Some(Pointer {
            sync_id,
            record_id,
            ordinal,
            text_hash: u32::from_str_radix(hash, 16).ok()?,
        })
    }
}

/// The text embedded for a segment: the record's display name, a newline, the passage.
pub fn segment_embedding_text(display_name: Option<&str>, passage: &str) -> String {
    match display_name {
        Some(name) => format!("{name}\n{passage}"),
        None => passage.to_string(),
    }
}

/// FNV-1a (32 bits) of a segment's text, as carried in its pointer.
pub fn text_hash(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.as_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn unbase64url(text: &str) -> Option<Vec<u8>> {
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            let v = ALPHABET.iter().position(|a| a == c)? as u32;
            n |= v << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
        // Bits below the last whole byte must be zero, so every pointer has one encoding.
        let used = 8 * (chunk.len() - 1);
        if n & ((1u32 << (24 - used)) - 1) != 0 {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn acl_tokens_are_normalised() {
        let acl = Acl {
            users: vec!["Alice@Example.com".into(), "alice@example.com".into()],
            groups: vec!["Eng".into()],
            domains: vec!["@Example.com".into()],
            anyone: true,
        };
        assert_eq!(
            acl.tokens(),
            [
                "anyone",
                "domain:example.com",
                "group:Eng",
                "user:alice@example.com"
            ]
        );
        assert!(Acl::default().tokens().is_empty());
    }

    #[test]
    fn domains_of_emails() {
        assert_eq!(email_domain("a@b.com"), Some("b.com"));
        assert_eq!(email_domain("U123"), None);
        assert_eq!(email_domain("@b.com"), None);
    }

    #[test]
    fn foreign_pointers_do_not_parse() {
        assert_eq!(Pointer::decode("chk_anchor"), None);
        assert_eq!(Pointer::decode("seg_"), None);
        assert_eq!(Pointer::decode("seg_!!!!"), None);
        assert_eq!(Pointer::decode(""), None);
    }

    proptest! {
        #[test]
        fn pointers_round_trip(sync in "[a-z0-9-]{1,36}", record in "\\PC{1,40}", ordinal in 0u32..10_000, hash in any::<u32>()) {
            let pointer = Pointer { sync_id: sync, record_id: record.replace('\n', " "), ordinal, text_hash: hash };
            let encoded = pointer.encode();
            prop_assert!(encoded.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
            prop_assert_eq!(Pointer::decode(&encoded), Some(pointer));
        }

        #[test]
        fn base64_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(unbase64url(&base64url(&bytes)), Some(bytes));
        }
    }
}
