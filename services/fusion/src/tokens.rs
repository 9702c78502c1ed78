//! Token counts of tool definitions with a real BPE: OpenAI's `o200k_base` encoding (GPT-4o and
//! later), ranks embedded in the binary.

/// BPE tokens of `text` (no special tokens).
pub fn count_tokens(text: &str) -> u32 {
    let bpe = tiktoken_rs::o200k_base_singleton();
    u32::try_from(bpe.count_ordinary(text)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_bpe_tokens() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello world"), 2);
        let def = r#"{"type":"function","function":{"name":"SLACK_POST_MESSAGE"}}"#;
        let n = count_tokens(def);
        assert!(n > 10 && n < 30, "{n}");
    }
}
