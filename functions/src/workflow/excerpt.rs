//! Bounded excerpts: the two shapes every workflow projection uses to stay small while saying
//! honestly what it left out.
//!
//! An [`Excerpt`] is a redacted prefix of a text; a [`BoundedList`] is a prefix of a list that
//! keeps the real `total`. Both carry a `truncated` flag that is true exactly when something the
//! reader would otherwise have seen is missing, so a receiver never mistakes a cut for the whole.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::redaction;

/// Unicode scalar values kept from a task instruction in a handoff or continuation excerpt.
pub const INSTRUCTION_EXCERPT_CHARS: usize = 600;

/// A redacted, bounded piece of text.
///
/// Serialized as `{"text": "...", "truncated": bool}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excerpt {
    /// The redacted, possibly shortened text.
    pub text: String,
    /// True iff redaction, a length bound or an earlier cut changed the text.
    pub truncated: bool,
}

/// Redacts `raw` with the Session credential rules, then keeps at most `max_chars` Unicode
/// scalar values.
///
/// Redaction runs before the cut so a secret can never survive by being split across the
/// boundary; `truncated` reports either change.
pub fn excerpt(raw: &str, max_chars: usize) -> Excerpt {
    let redacted = redaction::redact(raw);
    // A rule can match and still leave the text as it was (an already-redacted value), so the
    // flag compares content rather than trusting that a rule fired.
    let redaction_changed = redacted != raw;
    let mut out = Excerpt {
        text: redacted.into_owned(),
        truncated: redaction_changed,
    };
    // Excerpts are stored as JSON in Postgres, whose `jsonb` cannot hold U+0000.
    if out.text.contains('\0') {
        out.text = out.text.replace('\0', "\u{FFFD}");
        out.truncated = true;
    }
    shrink(&mut out, max_chars);
    out
}

/// Cuts `excerpt` to at most `max_bytes` bytes of UTF-8 (on a character boundary), setting
/// `truncated` when the cut removed anything. Stored excerpts are bounded in characters for the
/// reader and in bytes for the row they are stored in.
pub fn shrink_to_bytes(excerpt: &mut Excerpt, max_bytes: usize) {
    let keep = excerpt
        .text
        .char_indices()
        .take_while(|(at, c)| at + c.len_utf8() <= max_bytes)
        .count();
    shrink(excerpt, keep);
}

/// Cuts `excerpt` to at most `to_chars` Unicode scalar values, setting `truncated` when the
/// cut removed anything. Used by byte-budget reduction after an excerpt was built.
pub fn shrink(excerpt: &mut Excerpt, to_chars: usize) {
    if let Some((byte, _)) = excerpt.text.char_indices().nth(to_chars) {
        excerpt.text.truncate(byte);
        excerpt.truncated = true;
    }
}

/// Number of Unicode scalar values in `text` (the unit every excerpt bound counts in).
pub fn char_len(text: &str) -> usize {
    text.chars().count()
}

/// Instruction text as the caller holds it, with whether it was already redacted or cut
/// before reaching the projection (stored instruction excerpts are bounded when written, and
/// a later excerpt must not claim to be whole when its source was not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceText<'a> {
    /// The text, raw or previously redacted.
    pub text: &'a str,
    /// True when `text` is itself already a cut or redacted form of the original.
    pub already_truncated: bool,
}

impl<'a> SourceText<'a> {
    /// Text that is the original, unmodified instruction.
    pub fn raw(text: &'a str) -> Self {
        Self {
            text,
            already_truncated: false,
        }
    }

    /// Reads the stored instruction-excerpt convention `{"excerpt": "...", "truncated": bool}`
    /// (the shape of `workflow_sessions.root_instruction` and of `task_instruction` event
    /// payloads). `None` when `excerpt` is missing or not a string; a missing `truncated` is
    /// read as `false`.
    pub fn from_stored(value: &'a Value) -> Option<Self> {
        let text = value.get("excerpt")?.as_str()?;
        let already_truncated = value
            .get("truncated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Some(Self {
            text,
            already_truncated,
        })
    }

    /// The redacted excerpt of at most `max_chars`, truncated when this source already was.
    pub fn excerpt(&self, max_chars: usize) -> Excerpt {
        let mut out = excerpt(self.text, max_chars);
        out.truncated |= self.already_truncated;
        out
    }
}

/// A prefix of a list that remembers how long the whole list was.
///
/// Serialized as `{"items": [...], "total": n, "returned": n, "truncated": bool}`, where
/// `returned == items.len()`, `returned <= total` and `truncated == (returned < total)`. The
/// fields are private so those invariants hold however the list is reduced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundedList<T> {
    items: Vec<T>,
    total: usize,
    returned: usize,
    truncated: bool,
}

impl<T> BoundedList<T> {
    /// Keeps the first `max` of `all`, counting every element for `total`.
    pub fn new(all: impl IntoIterator<Item = T>, max: usize) -> Self {
        let mut items = Vec::new();
        let mut total = 0;
        for item in all {
            if items.len() < max {
                items.push(item);
            }
            total += 1;
        }
        let returned = items.len();
        Self {
            items,
            total,
            returned,
            truncated: returned < total,
        }
    }

    /// Drops the last kept item (byte-budget reduction); false when there was none.
    pub fn pop(&mut self) -> bool {
        if self.items.pop().is_none() {
            return false;
        }
        self.returned = self.items.len();
        self.truncated = true;
        true
    }

    /// The kept items, in order.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// How many items the whole list had.
    pub fn total(&self) -> usize {
        self.total
    }

    /// How many items were kept.
    pub fn returned(&self) -> usize {
        self.returned
    }

    /// Whether any item was left out.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

/// The first occurrence of each string, in order (newest-first lists keep their newest
/// observation).
pub fn first_occurrences<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|s| seen.insert(*s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_clean_text_is_whole() {
        let e = excerpt("fix the parser in src/lib.rs", 600);
        assert_eq!(e.text, "fix the parser in src/lib.rs");
        assert!(!e.truncated);
    }

    #[test]
    fn redaction_alone_marks_truncated() {
        let e = excerpt("deploy with token=7f3c9a1b2d4e5f60718293a4", 600);
        assert!(!e.text.contains("7f3c9a1b2d4e5f60718293a4"), "{}", e.text);
        assert!(e.truncated);
    }

    #[test]
    fn already_redacted_text_is_not_reported_as_changed() {
        let e = excerpt("token=[REDACTED]", 600);
        assert_eq!(e.text, "token=[REDACTED]");
        assert!(!e.truncated);
    }

    #[test]
    fn the_cut_counts_scalar_values_not_bytes() {
        let raw = "é漢🦀".repeat(300);
        let e = excerpt(&raw, 600);
        assert_eq!(char_len(&e.text), 600);
        assert!(e.truncated);
        let exact = "漢".repeat(600);
        let e = excerpt(&exact, 600);
        assert_eq!(e.text, exact);
        assert!(!e.truncated);
    }

    #[test]
    fn nul_is_replaced_and_flagged() {
        let e = excerpt("a\0b", 600);
        assert_eq!(e.text, "a\u{FFFD}b");
        assert!(e.truncated);
    }

    #[test]
    fn shrink_to_bytes_keeps_whole_characters() {
        let mut e = excerpt(&"🦀".repeat(10), 600);
        shrink_to_bytes(&mut e, 10);
        assert_eq!(e.text, "🦀🦀");
        assert!(e.truncated);
        let mut e = excerpt("abc", 600);
        shrink_to_bytes(&mut e, 3);
        assert_eq!((e.text.as_str(), e.truncated), ("abc", false));
    }

    #[test]
    fn shrink_only_flags_a_real_cut() {
        let mut e = excerpt("abc", 10);
        shrink(&mut e, 3);
        assert!(!e.truncated);
        shrink(&mut e, 1);
        assert_eq!(e.text, "a");
        assert!(e.truncated);
    }

    #[test]
    fn stored_source_carries_its_flag() {
        let v = serde_json::json!({"excerpt": "do it", "truncated": true});
        let s = SourceText::from_stored(&v).expect("excerpt present");
        assert_eq!(
            s.excerpt(600),
            Excerpt {
                text: "do it".into(),
                truncated: true
            }
        );
        assert_eq!(
            SourceText::from_stored(&serde_json::json!({"text": "x"})),
            None
        );
    }

    #[test]
    fn bounded_list_keeps_total_through_pops() {
        let mut l = BoundedList::new(1..=10, 4);
        assert_eq!(
            (l.items(), l.total(), l.returned(), l.truncated()),
            (&[1, 2, 3, 4][..], 10, 4, true)
        );
        let mut whole = BoundedList::new([1, 2], 4);
        assert!(!whole.truncated());
        assert!(whole.pop());
        assert_eq!(
            (whole.total(), whole.returned(), whole.truncated()),
            (2, 1, true)
        );
        while l.pop() {}
        assert_eq!((l.total(), l.returned()), (10, 0));
        assert_eq!(
            serde_json::to_value(&l).expect("serializes"),
            serde_json::json!({"items": [], "total": 10, "returned": 0, "truncated": true})
        );
    }

    #[test]
    fn first_occurrences_keep_order() {
        assert_eq!(
            first_occurrences(["b", "a", "b", "c", "a"]),
            ["b", "a", "c"]
        );
    }
}
