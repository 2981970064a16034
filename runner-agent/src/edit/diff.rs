//! The unified diff an edit answers with, bounded by [`MAX_EDIT_DIFF_BYTES`].

use std::time::Duration;

use similar::TextDiff;
use wc_runner_protocol::MAX_EDIT_DIFF_BYTES;

/// How long the line diff of one file may search for a minimal diff before it settles for a
/// larger one (still correct): a huge rewrite must not hold the edit up.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// A unified diff assembled file by file, cut after a whole line once it would pass
/// [`MAX_EDIT_DIFF_BYTES`].
#[derive(Default)]
pub(super) struct BoundedDiff {
    text: String,
    truncated: bool,
}

impl BoundedDiff {
    /// Adds the diff of one file from `old` to `new`, with `--- <old_name>` / `+++ <new_name>`
    /// headers and three lines of context. Nothing is added when the texts are equal.
    pub(super) fn add(&mut self, old: &str, new: &str, old_name: &str, new_name: &str) {
        if self.truncated {
            return;
        }
        let diff = TextDiff::configure()
            .timeout(DIFF_TIMEOUT)
            .diff_lines(old, new);
        let text = diff
            .unified_diff()
            .context_radius(3)
            .header(old_name, new_name)
            .to_string();
        self.push(&text);
    }

    fn push(&mut self, text: &str) {
        let room = MAX_EDIT_DIFF_BYTES - self.text.len();
        if text.len() <= room {
            self.text.push_str(text);
            return;
        }
        // The longest run of whole lines that fits.
        let cut = text[..room].rfind('\n').map_or(0, |i| i + 1);
        self.text.push_str(&text[..cut]);
        self.truncated = true;
    }

    /// The diff text and whether it was cut.
    pub(super) fn finish(self) -> (String, bool) {
        (self.text, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_both_sides_and_marks_a_missing_final_newline() {
        let mut d = BoundedDiff::default();
        d.add("a\nb\nc", "a\nB\nc", "a/f", "b/f");
        let (text, cut) = d.finish();
        assert_eq!(
            text,
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n"
        );
        assert!(!cut);
        let mut same = BoundedDiff::default();
        same.add("x\n", "x\n", "a/f", "b/f");
        assert_eq!(same.finish(), (String::new(), false));
    }

    #[test]
    fn a_long_diff_is_cut_after_a_whole_line_and_flagged() {
        let old: String = (0..200)
            .map(|i| format!("{i} {}\n", "x".repeat(1000)))
            .collect();
        let new = old.replace('x', "y");
        let mut d = BoundedDiff::default();
        d.add(&old, &new, "a/f", "b/f");
        d.add("x\n", "y\n", "a/g", "b/g");
        let (text, cut) = d.finish();
        assert!(cut);
        assert!(text.len() <= MAX_EDIT_DIFF_BYTES);
        assert!(text.ends_with('\n'));
        assert!(!text.contains("a/g"), "nothing follows a cut");
    }
}
