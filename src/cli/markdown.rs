//! Markdown for the reference pages the code writes (`reference`, `chart_values`): one rule for a
//! table cell, so every generated table escapes alike.

/// A table cell: pipes escaped, lines joined.
pub fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
