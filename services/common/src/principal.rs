//! Principals: the users (emails or a source's user ids) and email domains that ACLs, identities,
//! group memberships, JWT subjects and connections name. They are compared in one way only,
//! through [`key`]: trimmed, ASCII letters lowercased, every other character as it is. So
//! `Alice@Example.com` and `alice@example.com` are one principal, while two strings that differ
//! in anything but ASCII case (say `kim@x.com` and `\u{212a}im@x.com`, with a Kelvin sign) are
//! two, as their identity provider says they are. Unicode case folding is deliberately not used:
//! it maps distinct code points to one, so two different subjects could share an ACL token.
//!
//! Group ids are the source's own and compare exactly (after trimming); see
//! [`crate::context::group_token`].

/// Longest principal accepted, in characters.
pub const MAX_PRINCIPAL_CHARS: usize = 1024;

/// The form in which principals are compared and stored.
pub fn key(principal: &str) -> String {
    principal.trim().to_ascii_lowercase()
}

/// Whether two principals name the same one.
pub fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Checks a principal as received (an identity, a group member, a JWT `sub`, a user id): not
/// empty, at most [`MAX_PRINCIPAL_CHARS`] characters, no control characters (a newline would let
/// one principal pose as two in logs or tokens). Returns its [`key`], or the problem.
pub fn checked(principal: &str) -> Result<String, String> {
    let trimmed = principal.trim();
    if trimmed.is_empty() {
        return Err("must not be empty".into());
    }
    if trimmed.chars().count() > MAX_PRINCIPAL_CHARS || trimmed.chars().any(char::is_control) {
        return Err(format!(
            "must be at most {MAX_PRINCIPAL_CHARS} printable characters"
        ));
    }
    Ok(key(trimmed))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn ascii_case_and_spaces_do_not_matter() {
        assert_eq!(key("  Alice@Example.COM "), "alice@example.com");
        assert!(same("Alice@Example.com", " alice@example.com"));
    }

    #[test]
    fn other_characters_are_kept_as_they_are() {
        // A Kelvin sign lowercases to `k` under Unicode folding; here it stays a different user.
        assert_ne!(key("\u{212a}im@x.com"), key("kim@x.com"));
        assert!(!same("\u{212a}im@x.com", "kim@x.com"));
        // Non-ASCII letters keep their case: `É` and `é` are different code points.
        assert_ne!(key("\u{c9}lise@x.com"), key("\u{e9}lise@x.com"));
    }

    #[test]
    fn malformed_principals_are_refused() {
        assert!(checked("").is_err());
        assert!(checked("   ").is_err());
        assert!(checked("a@b.com\nuser:admin@b.com").is_err());
        assert!(checked("a\u{0}b").is_err());
        assert!(checked(&"a".repeat(MAX_PRINCIPAL_CHARS + 1)).is_err());
        assert_eq!(
            checked(&"a".repeat(MAX_PRINCIPAL_CHARS)).unwrap().len(),
            MAX_PRINCIPAL_CHARS
        );
        assert_eq!(checked(" Bob@B.com ").unwrap(), "bob@b.com");
    }

    proptest! {
        #[test]
        fn same_is_equality_of_keys(a in "\\PC{0,12}", b in "\\PC{0,12}") {
            prop_assert_eq!(same(&a, &b), key(&a) == key(&b));
        }

        #[test]
        fn keys_are_fixed_points(a in "\\PC{0,24}") {
            prop_assert_eq!(key(&key(&a)), key(&a));
        }
    }
}
