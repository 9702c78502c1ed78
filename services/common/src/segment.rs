//! Splits a record's text into passages ("segments") for context search.
//!
//! The rules, in order:
//!
//! 1. **Newlines.** `\r\n` and lone `\r` become `\n`.
//! 2. **Paragraphs** are runs of non-blank lines; a line holding only whitespace separates them.
//! 3. **Words** are the whitespace-separated (Unicode `White_Space`) pieces of a paragraph. All
//!    whitespace between words collapses to one space, so segment text never repeats or keeps
//!    tabs, line breaks or runs of spaces from inside a sentence.
//! 4. **Sentences.** A sentence ends after a word that ends in `.`, `!` or `?`, optionally
//!    followed by closing quotes or brackets (`"`, `'`, `”`, `’`, `)`, `]`, `}`, `»`), because the
//!    next character is whitespace or the paragraph's end. A `.` does not end a sentence after
//!    an abbreviation: `Mr.`, `Mrs.`, `Ms.`, `Dr.`, `Prof.`, `Sr.`, `Jr.`, `St.`, `vs.`, `cf.`,
//!    `approx.`, `fig.` (any case), dotted letter runs such as `e.g.`, `i.e.` or `U.S.`, and single
//!    capital initials such as `J.`. Dots inside a word (`3.14`, `v1.2.0`, `example.com`) never
//!    end a sentence. A sentence also ends at a line break when the current line is a heading
//!    or the next line starts a list item or heading: its first word is `-`, `*`, `+`, `•`, a run
//!    of `#`, or 1–9 digits followed by `.` or `)` (`1.`, `12)`); such a marker does not itself
//!    end a sentence. The paragraph's end ends its last sentence.
//! 5. **Long sentences.** A sentence longer than `segment_words` words is cut into consecutive,
//!    non-overlapping windows of `segment_words` words (the last may be shorter); each window
//!    then counts as a sentence.
//! 6. **Packing.** Whole sentences are added to the current segment in order until adding the
//!    next one would make the segment's new (non-overlap) words exceed `segment_words`. When the
//!    next sentence starts a new paragraph and the segment already holds at least half of
//!    `segment_words` words (overlap included), the segment ends at that paragraph end instead.
//! 7. **Overlap.** When a segment ends and the next one continues the same paragraph, the next
//!    segment starts with the previous segment's trailing whole sentences of that paragraph whose
//!    words total at most `overlap_words` (none when the last sentence alone is longer). There is
//!    never overlap across a paragraph break.
//! 8. **Text.** Sentences within a segment are joined by one space, paragraphs by `"\n\n"`; a
//!    segment is trimmed. Empty or whitespace-only text gives no segments.
//!
//! So every segment has at most `segment_words` new words plus at most `overlap_words` repeated
//! ones, and the segments' new words, in order, are exactly the text's words. `segment_words`
//! of 0 is treated as 1. Segmenting is deterministic, never panics, and runs in time linear in
//! the input plus the output (the output is at most about `1 + overlap_words / segment_words`
//! times the input).

use std::borrow::Cow;

use crate::config::ContextConfig;

/// How [`segment`] sizes passages.
#[derive(Clone, Copy, Debug)]
pub struct SegmentParams {
    /// Words a segment aims for (new words, overlap excluded); at least 1 is used.
    pub segment_words: usize,
    /// Most words of the previous segment's last sentences repeated at the start of the next.
    pub overlap_words: usize,
}

impl Default for SegmentParams {
    fn default() -> Self {
        Self::from(&ContextConfig::default())
    }
}

impl From<&ContextConfig> for SegmentParams {
    fn from(config: &ContextConfig) -> Self {
        Self {
            segment_words: usize::try_from(config.segment_words).unwrap_or(usize::MAX),
            overlap_words: usize::try_from(config.overlap_words).unwrap_or(usize::MAX),
        }
    }
}

/// Splits a record's text into passages; see the [module docs](self) for the rules.
pub fn segment(text: &str, params: SegmentParams) -> Vec<String> {
    segment_parts(text, params)
        .into_iter()
        .map(|part| part.text)
        .collect()
}

/// One segment and how many of its leading words repeat the previous segment.
#[derive(Debug)]
struct Part {
    text: String,
    /// Only the tests read it, to check the overlap.
    #[cfg_attr(not(test), allow(dead_code))]
    overlap_words: usize,
}

/// A sentence (or window of a long one): words `start..end` of paragraph `para`.
#[derive(Clone, Copy, Debug)]
struct Unit {
    start: usize,
    end: usize,
    para: usize,
}

impl Unit {
    fn words(self) -> usize {
        self.end - self.start
    }
}

const CLOSERS: &[char] = &['"', '\'', '\u{201d}', '\u{2019}', ')', ']', '}', '\u{bb}'];
const OPENERS: &[char] = &['"', '\'', '\u{201c}', '\u{2018}', '(', '[', '{', '\u{ab}'];
const ABBREVIATIONS: &[&str] = &[
    "mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "vs.", "cf.", "approx.", "fig.",
];

fn segment_parts(text: &str, params: SegmentParams) -> Vec<Part> {
    let limit = params.segment_words.max(1);
    let text: Cow<'_, str> = if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    };
    let (words, units) = split_units(&text, limit);
    pack(&words, &units, limit, params.overlap_words)
}

/// Splits text into its words and its sentence units (long sentences already windowed).
fn split_units(text: &str, limit: usize) -> (Vec<&str>, Vec<Unit>) {
    let mut words: Vec<&str> = Vec::new();
    let mut units = Vec::new();
    let mut para = 0;
    let mut para_open = false;
    let mut sentence_start = 0;
    // Whether the previous non-blank line of this paragraph is a heading.
    let mut prev_line_heading = false;

    let mut close_sentence = |words: &Vec<&str>, start: &mut usize, para: usize| {
        let end = words.len();
        let mut s = *start;
        while s < end {
            let e = end.min(s.saturating_add(limit));
            units.push(Unit {
                start: s,
                end: e,
                para,
            });
            s = e;
        }
        *start = end;
    };

    for line in text.split('\n') {
        let mut line_words = line.split_whitespace().peekable();
        let Some(&first) = line_words.peek() else {
            // A blank line ends the paragraph.
            if para_open {
                close_sentence(&words, &mut sentence_start, para);
                para += 1;
                para_open = false;
            }
            continue;
        };
        if para_open && (prev_line_heading || is_list_or_heading(first)) {
            close_sentence(&words, &mut sentence_start, para);
        }
        para_open = true;
        prev_line_heading = is_heading(first);
        for (i, word) in line_words.enumerate() {
            words.push(word);
            // A line's leading list marker (`1.`) does not end a sentence.
            if ends_sentence(word) && !(i == 0 && is_list_or_heading(word)) {
                close_sentence(&words, &mut sentence_start, para);
            }
        }
    }
    if para_open {
        close_sentence(&words, &mut sentence_start, para);
    }
    (words, units)
}

fn is_heading(word: &str) -> bool {
    word.chars().all(|c| c == '#')
}

fn is_list_or_heading(word: &str) -> bool {
    if matches!(word, "-" | "*" | "+" | "\u{2022}") || is_heading(word) {
        return true;
    }
    let Some(digits) = word.strip_suffix(['.', ')']) else {
        return false;
    };
    (1..=9).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

fn ends_sentence(word: &str) -> bool {
    let core = word.trim_end_matches(CLOSERS);
    if core.ends_with(['!', '?']) {
        return true;
    }
    core.ends_with('.') && !is_abbreviation(core.trim_start_matches(OPENERS))
}

/// Whether `core` (ending in `.`) is an abbreviation rather than a sentence end.
fn is_abbreviation(core: &str) -> bool {
    if ABBREVIATIONS
        .iter()
        .any(|abbreviation| core.eq_ignore_ascii_case(abbreviation))
    {
        return true;
    }
    // Dotted letter runs: `e.g.`, `i.e.`, `U.S.`, and single capital initials `J.`.
    let Some(body) = core.strip_suffix('.') else {
        return false;
    };
    let mut letters = 0usize;
    let mut only_letter = None;
    for piece in body.split('.') {
        let mut chars = piece.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_alphabetic() => {
                letters += 1;
                only_letter = Some(c);
            }
            _ => return false,
        }
    }
    letters >= 2 || only_letter.is_some_and(char::is_uppercase)
}

/// Packs sentence units into segments with overlap.
fn pack(words: &[&str], units: &[Unit], limit: usize, overlap_limit: usize) -> Vec<Part> {
    let mut parts = Vec::new();
    // Units of the current segment; the first `overlap` of them repeat the previous segment.
    let mut current: Vec<Unit> = Vec::new();
    let mut overlap = 0;
    let mut overlap_words = 0;
    let mut new_words = 0;

    for &unit in units {
        if current.len() > overlap {
            let last = current[current.len() - 1];
            let new_para = unit.para != last.para;
            let held = overlap_words + new_words;
            if new_words + unit.words() > limit || (new_para && held.saturating_mul(2) >= limit) {
                parts.push(render(words, &current, overlap_words));
                // The next segment's overlap: trailing sentences of the same paragraph.
                let mut carried = 0;
                let mut keep = 0;
                if !new_para {
                    for previous in current.iter().rev() {
                        if previous.para != unit.para || carried + previous.words() > overlap_limit
                        {
                            break;
                        }
                        carried += previous.words();
                        keep += 1;
                    }
                }
                current.drain(..current.len() - keep);
                overlap = keep;
                overlap_words = carried;
                new_words = 0;
            }
        }
        current.push(unit);
        new_words += unit.words();
    }
    if current.len() > overlap {
        parts.push(render(words, &current, overlap_words));
    }
    parts
}

fn render(words: &[&str], units: &[Unit], overlap_words: usize) -> Part {
    let mut text = String::new();
    let mut para = None;
    for unit in units {
        if let Some(previous) = para {
            text.push_str(if previous == unit.para { " " } else { "\n\n" });
        }
        para = Some(unit.para);
        for (i, word) in words[unit.start..unit.end].iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(word);
        }
    }
    Part {
        text,
        overlap_words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(segment_words: usize, overlap_words: usize) -> SegmentParams {
        SegmentParams {
            segment_words,
            overlap_words,
        }
    }

    /// Sentence units as strings, to test sentence splitting on its own.
    fn sentences(text: &str) -> Vec<String> {
        let (words, units) = split_units(text, usize::MAX);
        units
            .iter()
            .map(|u| words[u.start..u.end].join(" "))
            .collect()
    }

    fn sentence(n: usize, tag: &str) -> String {
        let mut words: Vec<String> = (1..n).map(|i| format!("{tag}{i}")).collect();
        words.push(format!("{tag}{n}."));
        words.join(" ")
    }

    #[test]
    fn params_from_config() {
        let p = SegmentParams::from(&ContextConfig::default());
        assert_eq!((p.segment_words, p.overlap_words), (150, 30));
    }

    #[test]
    fn empty_and_whitespace_give_nothing() {
        for text in ["", " ", "\n\n\r\n", "\t \u{2003}\u{a0}\n  \n"] {
            assert!(
                segment(text, SegmentParams::default()).is_empty(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn sentence_ends_and_abbreviations() {
        let text = "Dr. Smith met Mr. Jones, e.g. at 3.14 p.m. on the U.S. coast. \
                    Was it J. R. Doe? Yes! \"Quoted end.\" (Bracketed end.) Next, i.e. \
                    more vs. less. Version v1.2.0 of example.com shipped... Done";
        assert_eq!(
            sentences(text),
            [
                "Dr. Smith met Mr. Jones, e.g. at 3.14 p.m. on the U.S. coast.",
                "Was it J. R. Doe?",
                "Yes!",
                "\"Quoted end.\"",
                "(Bracketed end.)",
                "Next, i.e. more vs. less.",
                "Version v1.2.0 of example.com shipped...",
                "Done",
            ]
        );
    }

    #[test]
    fn lowercase_single_letter_ends_a_sentence() {
        assert_eq!(
            sentences("Pick option a. Then go."),
            ["Pick option a.", "Then go."]
        );
    }

    #[test]
    fn list_items_and_headings_are_boundaries() {
        let text = "# Launch plan\nGoals for the launch\n- ship the beta\n- tell customers\n\
                    1. first step\n2) second step\nstill the second step";
        assert_eq!(
            sentences(text),
            [
                "# Launch plan",
                "Goals for the launch",
                "- ship the beta",
                "- tell customers",
                "1. first step",
                "2) second step still the second step",
            ]
        );
    }

    #[test]
    fn whitespace_collapses_and_newlines_normalise() {
        let text = "One  two\tthree\r\nfour.\r\n\r\nNew   paragraph.\rSame paragraph.";
        assert_eq!(
            segment(text, params(150, 30)),
            ["One two three four.\n\nNew paragraph. Same paragraph."]
        );
    }

    #[test]
    fn small_paragraphs_share_a_segment() {
        let text = "First para.\n\nSecond para.\n \nThird para.";
        assert_eq!(
            segment(text, params(150, 30)),
            ["First para.\n\nSecond para.\n\nThird para."]
        );
    }

    #[test]
    fn prefers_paragraph_end_after_half() {
        // 6 words then a new paragraph: 6 >= 10 / 2, so the segment ends there.
        let text = format!("{}\n\n{}", sentence(6, "a"), sentence(3, "b"));
        assert_eq!(
            segment(&text, params(10, 4)),
            [sentence(6, "a"), sentence(3, "b")]
        );
        // 4 words is under half: the next paragraph joins.
        let text = format!("{}\n\n{}", sentence(4, "a"), sentence(3, "b"));
        assert_eq!(
            segment(&text, params(10, 4)),
            [format!("{}\n\n{}", sentence(4, "a"), sentence(3, "b"))]
        );
    }

    #[test]
    fn overlap_repeats_trailing_sentences_of_the_paragraph() {
        let (a, b, c, d) = (
            sentence(4, "a"),
            sentence(2, "b"),
            sentence(3, "c"),
            sentence(5, "d"),
        );
        let text = format!("{a} {b} {c} {d}");
        // a+b+c = 9 words; d would make 14 > 10. Overlap of 5: c (3) + b (2).
        let parts = segment_parts(&text, params(10, 5));
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].text, format!("{a} {b} {c}"));
        assert_eq!(parts[1].text, format!("{b} {c} {d}"));
        assert_eq!((parts[0].overlap_words, parts[1].overlap_words), (0, 5));
        // Overlap of 4: only c fits, whole sentences only.
        assert_eq!(segment(&text, params(10, 4))[1], format!("{c} {d}"));
        // Overlap of 2: the last sentence alone (3 words) is too long, so none.
        assert_eq!(segment(&text, params(10, 2))[1], d);
    }

    #[test]
    fn no_overlap_across_paragraphs() {
        let text = format!(
            "{} {}\n\n{}",
            sentence(5, "a"),
            sentence(2, "b"),
            sentence(5, "c")
        );
        assert_eq!(
            segment(&text, params(8, 5)),
            [
                format!("{} {}", sentence(5, "a"), sentence(2, "b")),
                sentence(5, "c")
            ]
        );
    }

    #[test]
    fn long_sentence_is_windowed() {
        let words: Vec<String> = (1..=25).map(|i| format!("w{i}")).collect();
        let text = format!("{}. Short end.", words.join(" "));
        let segments = segment(&text, params(10, 3));
        assert_eq!(
            segments,
            [
                words[0..10].join(" "),
                words[10..20].join(" "),
                format!("{}. Short end.", words[20..25].join(" ")),
            ]
        );
    }

    #[test]
    fn zero_segment_words_is_one() {
        assert_eq!(segment("a b. c", params(0, 0)), ["a", "b.", "c"]);
    }

    #[test]
    fn large_inputs_do_not_blow_up() {
        let sentence = "The quick brown fox, e.g. Mr. Fox, jumps over 3.14 lazy dogs. ";
        let mut text = String::new();
        while text.len() < 1 << 20 {
            text.push_str(sentence);
            if text.len().is_multiple_of(7) {
                text.push_str("\n\n");
            }
        }
        let segments = segment(&text, SegmentParams::default());
        assert!(segments.len() > 1000);
        let one_word = "x".repeat(1 << 20);
        assert_eq!(segment(&one_word, SegmentParams::default()), [one_word]);
        let no_ends = "word ".repeat(200_000);
        let segments = segment(&no_ends, SegmentParams::default());
        assert_eq!(segments.len(), 200_000usize.div_ceil(150));
    }

    /// Text made of pieces that exercise the rules.
    fn texty() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("word".to_string()),
            Just("end.".to_string()),
            Just("why?".to_string()),
            Just("wow!\"".to_string()),
            Just("e.g.".to_string()),
            Just("Dr.".to_string()),
            Just("J.".to_string()),
            Just("3.14".to_string()),
            Just("- ".to_string()),
            Just("# ".to_string()),
            Just("1.".to_string()),
            Just(" ".to_string()),
            Just("\n".to_string()),
            Just("\n\n".to_string()),
            Just("\r\n".to_string()),
            Just("\t".to_string()),
            "[a-zé\u{4e2d}]{1,6}",
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..200).prop_map(|pieces| pieces.concat())
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop_oneof![texty(), any::<String>()]
    }

    proptest! {
        #[test]
        fn segments_are_bounded_and_lose_nothing(
            text in any_text(),
            segment_words in 0usize..40,
            overlap_words in 0usize..25,
        ) {
            let p = params(segment_words, overlap_words);
            let parts = segment_parts(&text, p);
            let mut rebuilt: Vec<&str> = Vec::new();
            let mut previous: Option<Vec<&str>> = None;
            for part in &parts {
                let words: Vec<&str> = part.text.split_whitespace().collect();
                prop_assert!(!words.is_empty());
                prop_assert_eq!(part.text.trim(), part.text.as_str());
                prop_assert!(words.len() <= segment_words.max(1) + overlap_words);
                prop_assert!(part.overlap_words <= overlap_words);
                prop_assert!(part.overlap_words < words.len());
                if let Some(previous) = &previous {
                    let tail = &previous[previous.len() - part.overlap_words..];
                    prop_assert_eq!(tail, &words[..part.overlap_words]);
                } else {
                    prop_assert_eq!(part.overlap_words, 0);
                }
                rebuilt.extend(&words[part.overlap_words..]);
                previous = Some(words);
            }
            let expected: Vec<&str> = text.split_whitespace().collect();
            prop_assert_eq!(rebuilt, expected);
        }

        #[test]
        fn segmenting_is_deterministic(
            text in any_text(),
            segment_words in 0usize..40,
            overlap_words in 0usize..25,
        ) {
            let p = params(segment_words, overlap_words);
            prop_assert_eq!(segment(&text, p), segment(&text, p));
        }

        #[test]
        fn never_panics(text in any::<String>(), segment_words in any::<usize>(), overlap_words in any::<usize>()) {
            let _ = segment(&text, params(segment_words, overlap_words));
        }
    }
}
