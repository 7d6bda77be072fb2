//! The series a PromQL expression (or a Grafana `label_values` query) reads: each metric name with
//! the label names its matchers use. Enough PromQL to check dashboards and alerts against what
//! the binaries export; not a full parser.

/// One series selector: `name{label="..", ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub name: String,
    pub labels: Vec<String>,
}

/// Words that are never metric names: operators, modifiers, and aggregations (which may be
/// followed by `by (...)` rather than `(`).
const KEYWORDS: &str = "and or unless bool offset by without on ignoring group_left group_right \
    inf nan Inf NaN sum min max avg count stddev stdvar topk bottomk quantile count_values group \
    limitk limit_ratio";
/// Keywords followed by a parenthesised list of label names, not an expression.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Drops Grafana's variables (`$x`, `${x}`, `${x:pipe}`), which only appear in strings and
/// ranges here.
fn without_variables(expr: &str) -> String {
    let mut out = String::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'{') {
            for d in chars.by_ref() {
                if d == '}' {
                    break;
                }
            }
        } else {
            while chars.peek().is_some_and(|d| is_ident(*d)) {
                chars.next();
            }
        }
    }
    out
}

fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

fn skip_to(chars: &[char], mut i: usize, end: char) -> usize {
    while i < chars.len() && chars[i] != end {
        i += 1;
    }
    i + 1
}

/// The label names of a matcher list starting at `{`; returns them and the index after `}`.
fn matchers(chars: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut labels = Vec::new();
    i += 1;
    while i < chars.len() && chars[i] != '}' {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
        } else if is_ident_start(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            labels.push(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    (labels, i + 1)
}

fn next_non_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Every selector in a PromQL expression, in order.
pub fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = without_variables(expr).chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '[' {
            i = skip_to(&chars, i, ']');
        } else if c == '{' {
            // A selector with no name, `{__name__=...}`: not used here.
            let (_, next) = matchers(&chars, i);
            i = next;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = next_non_space(&chars, i);
            let opens = chars.get(after) == Some(&'(');
            if LABEL_LISTS.contains(&word.as_str()) {
                if opens {
                    i = skip_to(&chars, after, ')');
                }
            } else if KEYWORDS.split_whitespace().any(|k| k == word) || opens {
                // A keyword, or a function or aggregation called here.
            } else {
                let mut labels = Vec::new();
                if chars.get(after) == Some(&'{') {
                    let (l, next) = matchers(&chars, after);
                    labels = l;
                    i = next;
                }
                out.push(Selector { name: word, labels });
            }
        } else {
            i += 1;
        }
    }
    out
}

/// A Grafana variable query: `label_values(expr, label)` gives the selectors of `expr`, with
/// `label` added to each (it must exist on them); `label_values(label)` gives none.
pub fn variable_selectors(query: &str) -> Vec<Selector> {
    let q = query.trim();
    let Some(inner) = q
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
    else {
        return selectors(q);
    };
    let Some((expr, label)) = inner.rsplit_once(',') else {
        return Vec::new();
    };
    selectors(expr)
        .into_iter()
        .map(|mut s| {
            s.labels.push(label.trim().to_owned());
            s
        })
        .collect()
}

/// The series on a `/metrics` page: each sample's name and label names.
pub fn exported(page: &str) -> Vec<Selector> {
    let mut out = Vec::new();
    for line in page.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        let name: String = chars[..i].iter().collect();
        let labels = if chars.get(i) == Some(&'{') {
            matchers(&chars, i).0
        } else {
            Vec::new()
        };
        out.push(Selector { name, labels });
    }
    out
}
