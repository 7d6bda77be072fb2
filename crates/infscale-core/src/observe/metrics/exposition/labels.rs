//! Label sets: `{name="value",...}`, scanned once to validate, iterated lazily afterwards.
//!
//! A label value may hold commas, braces, `=` and the escapes `\\`, `\"` and `\n`, so the set is
//! read by a small state machine, never split on commas. Validation allocates nothing; a value is
//! unescaped (and so allocated) only when a caller asks for it and it holds an escape.

use super::error::LineErrorKind;
use std::borrow::Cow;

/// Validates the label set that opens at `bytes[open] == b'{'` and returns the index just past
/// its closing brace. A trailing comma before `}` is accepted, as Prometheus accepts it.
pub(super) fn scan_label_set(bytes: &[u8], open: usize) -> Result<usize, LineErrorKind> {
    let mut i = skip_blanks(bytes, open + 1);
    loop {
        match bytes.get(i) {
            None => return Err(LineErrorKind::UnclosedLabels),
            Some(b'}') => return Ok(i + 1),
            Some(_) => {}
        }
        let name_end = scan_label_name(bytes, i);
        if name_end == i {
            return Err(LineErrorKind::BadLabelName);
        }
        i = skip_blanks(bytes, name_end);
        if bytes.get(i) != Some(&b'=') {
            return Err(LineErrorKind::MissingEquals);
        }
        i = skip_blanks(bytes, i + 1);
        if bytes.get(i) != Some(&b'"') {
            return Err(LineErrorKind::UnquotedLabelValue);
        }
        i = scan_quoted(bytes, i + 1)?;
        i = skip_blanks(bytes, i);
        match bytes.get(i) {
            Some(b',') => i = skip_blanks(bytes, i + 1),
            Some(b'}') => return Ok(i + 1),
            None => return Err(LineErrorKind::UnclosedLabels),
            Some(_) => return Err(LineErrorKind::MissingComma),
        }
    }
}

/// Reads a quoted value whose opening quote is just before `start`; returns the index just past
/// the closing quote.
fn scan_quoted(bytes: &[u8], start: usize) -> Result<usize, LineErrorKind> {
    let mut i = start;
    loop {
        let Some(offset) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
            return Err(LineErrorKind::UnclosedLabels);
        };
        i += offset;
        if bytes[i] == b'"' {
            return Ok(i + 1);
        }
        match bytes.get(i + 1) {
            Some(b'\\' | b'"' | b'n') => i += 2,
            None => return Err(LineErrorKind::UnclosedLabels),
            Some(_) => return Err(LineErrorKind::BadEscape),
        }
    }
}

fn scan_label_name(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    if let Some(&b) = bytes.get(i) {
        if !(b.is_ascii_alphabetic() || b == b'_') {
            return start;
        }
        i += 1;
    }
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii_alphanumeric() || b == b'_' {
            i += 1;
        } else {
            break;
        }
    }
    i
}

pub(super) fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// The labels of one sample, in page order. Built only over text that `scan_label_set`
/// accepted, so iteration cannot fail.
#[derive(Debug, Clone)]
pub struct Labels<'a> {
    rest: &'a str,
}

impl<'a> Labels<'a> {
    /// `inner` is the validated text between the braces (empty when there were none).
    pub(super) fn new(inner: &'a str) -> Self {
        Labels { rest: inner }
    }
}

/// One label: its name and its value as written (still escaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label<'a> {
    pub name: &'a str,
    raw: &'a str,
}

impl<'a> Label<'a> {
    /// The unescaped value; borrowed unless the value holds an escape.
    pub fn value(&self) -> Cow<'a, str> {
        if !self.raw.contains('\\') {
            return Cow::Borrowed(self.raw);
        }
        let mut out = String::with_capacity(self.raw.len());
        let mut chars = self.raw.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        }
        Cow::Owned(out)
    }

    /// The value exactly as written between the quotes.
    pub fn raw_value(&self) -> &'a str {
        self.raw
    }
}

impl<'a> Iterator for Labels<'a> {
    type Item = Label<'a>;

    fn next(&mut self) -> Option<Label<'a>> {
        let text = self.rest.trim_start_matches([' ', '\t', ',']);
        let eq = text.find('=')?;
        let name = text[..eq].trim_end_matches([' ', '\t']);
        let after_eq = text[eq + 1..].trim_start_matches([' ', '\t']);
        let body = after_eq.strip_prefix('"')?;
        let bytes = body.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        let end = i.min(bytes.len());
        self.rest = body.get(end + 1..).unwrap_or("");
        Some(Label {
            name,
            raw: &body[..end],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> Result<usize, LineErrorKind> {
        scan_label_set(text.as_bytes(), 0)
    }

    fn pairs(inner: &str) -> Vec<(String, String)> {
        Labels::new(inner)
            .map(|l| (l.name.to_owned(), l.value().into_owned()))
            .collect()
    }

    #[test]
    fn accepts_commas_braces_and_escapes_in_values() {
        let set = r#"{a="x,y",b="{}",c="say \"hi\"",d="back\\slash",e="two\nlines"}"#;
        assert_eq!(scan(set), Ok(set.len()));
        let inner = &set[1..set.len() - 1];
        assert_eq!(
            pairs(inner),
            vec![
                ("a".into(), "x,y".into()),
                ("b".into(), "{}".into()),
                ("c".into(), "say \"hi\"".into()),
                ("d".into(), "back\\slash".into()),
                ("e".into(), "two\nlines".into()),
            ]
        );
    }

    #[test]
    fn accepts_blanks_trailing_comma_and_empty_set() {
        assert_eq!(scan("{}"), Ok(2));
        assert_eq!(scan("{ a = \"1\" , }"), Ok(13));
        assert_eq!(pairs(" a = \"1\" , "), vec![("a".into(), "1".into())]);
    }

    #[test]
    fn values_without_escapes_are_borrowed() {
        let label = Labels::new("model_name=\"llama\"").next().unwrap();
        assert!(matches!(label.value(), Cow::Borrowed("llama")));
    }

    #[test]
    fn rejects_malformed_sets() {
        assert_eq!(scan("{a=\"1\""), Err(LineErrorKind::UnclosedLabels));
        assert_eq!(scan("{a=\"1"), Err(LineErrorKind::UnclosedLabels));
        assert_eq!(scan("{1a=\"1\"}"), Err(LineErrorKind::BadLabelName));
        assert_eq!(scan("{a:b=\"1\"}"), Err(LineErrorKind::MissingEquals));
        assert_eq!(scan("{a 1}"), Err(LineErrorKind::MissingEquals));
        assert_eq!(scan("{a=1}"), Err(LineErrorKind::UnquotedLabelValue));
        assert_eq!(scan("{a=\"\\t\"}"), Err(LineErrorKind::BadEscape));
        assert_eq!(scan("{a=\"1\" b=\"2\"}"), Err(LineErrorKind::MissingComma));
        assert_eq!(scan("{a=\"1\\"), Err(LineErrorKind::UnclosedLabels));
    }
}
