//! "Did you mean": the known name nearest a misspelt one, for the errors that name an unknown
//! policy key or trigger key (`lookahed` -> `lookahead`, `scaleDownWindow` -> ...).
//!
//! Nearest is the fewest single-character edits (insert, delete, replace, or swap two
//! neighbours), ignoring case; a name further than a third of its length away (at least 1, at
//! most 3 edits) is no suggestion, so a word unlike every key gets the list of keys alone.

/// The known name nearest `typed`, when one is near enough to be the one meant.
pub fn nearest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typed = typed.trim().to_ascii_lowercase();
    let limit = (typed.chars().count() / 3).clamp(1, 3);
    known
        .into_iter()
        .map(|k| (edits(&typed, &k.to_ascii_lowercase()), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// The optimal-string-alignment distance between `a` and `b`.
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for a swap), one back, this one.
    let mut two: Vec<usize> = vec![0; b.len() + 1];
    let mut one: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (one[j] + 1).min(row[j - 1] + 1).min(one[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(two[j - 2] + 1);
            }
        }
        two = std::mem::replace(&mut one, row);
    }
    one[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_misspelling_gets_the_key_and_a_stranger_gets_none() {
        let keys = [
            "lookahead",
            "downwindow",
            "upwindow",
            "min",
            "max",
            "cooldown",
        ];
        assert_eq!(nearest("lookahed", keys), Some("lookahead"));
        assert_eq!(nearest("LookAhead", keys), Some("lookahead"));
        assert_eq!(nearest("downwidnow", keys), Some("downwindow"));
        assert_eq!(nearest("mni", keys), Some("min"));
        assert_eq!(nearest("banana", keys), None);
        assert_eq!(nearest("", keys), None);
    }

    #[test]
    fn edits_count_inserts_deletes_replacements_and_swaps() {
        assert_eq!(edits("abc", "abc"), 0);
        assert_eq!(edits("abc", "acb"), 1);
        assert_eq!(edits("abc", "ab"), 1);
        assert_eq!(edits("abc", "abcd"), 1);
        assert_eq!(edits("abc", "xbc"), 1);
        assert_eq!(edits("", "abc"), 3);
    }
}
