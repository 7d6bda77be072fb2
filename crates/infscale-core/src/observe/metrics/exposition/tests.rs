//! Table tests for the scanner: every case of the format that the profiles rely on.

use super::*;

fn one(line: &str) -> OwnedSample {
    let (samples, scan) = collect(line.as_bytes());
    assert_eq!(scan.skipped, 0, "{line}: {:?}", scan.errors);
    assert_eq!(samples.len(), 1, "{line}");
    samples.into_iter().next().unwrap()
}

fn bad(line: &str) -> LineErrorKind {
    let (samples, scan) = collect(line.as_bytes());
    assert!(samples.is_empty(), "{line} was accepted");
    assert_eq!(scan.skipped, 1, "{line}");
    scan.errors[0].kind
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn names_with_colons() {
    let s = one("vllm:num_requests_running{model_name=\"m\"} 3");
    assert_eq!(s.name, "vllm:num_requests_running");
    assert_eq!(s.value, 3.0);
    assert_eq!(s.labels, labels(&[("model_name", "m")]));
    assert_eq!(one(":leading:colon 1").name, ":leading:colon");
}

#[test]
fn label_values_with_commas_braces_and_escapes() {
    let s = one(r#"m{path="/a,b{c}",q="say \"x\"",b="c:\\dir",n="1\n2"} 1"#);
    assert_eq!(
        s.labels,
        labels(&[
            ("path", "/a,b{c}"),
            ("q", "say \"x\""),
            ("b", "c:\\dir"),
            ("n", "1\n2")
        ])
    );
}

#[test]
fn special_values() {
    assert!(one("m NaN").value.is_nan());
    assert_eq!(one("m +Inf").value, f64::INFINITY);
    assert_eq!(one("m -Inf").value, f64::NEG_INFINITY);
    assert_eq!(one("m 1.5e3").value, 1500.0);
    assert_eq!(one("m -0.25").value, -0.25);
}

#[test]
fn timestamps_integer_milliseconds_and_float_seconds() {
    assert_eq!(one("m 1 1700000000000").timestamp, Some(1.7e12));
    assert_eq!(one("m 1 1700000000.123").timestamp, Some(1700000000.123));
    assert_eq!(one("m 1").timestamp, None);
    assert_eq!(bad("m 1 soon"), LineErrorKind::BadTimestamp);
    assert_eq!(bad("m 1 NaN"), LineErrorKind::BadTimestamp);
}

#[test]
fn crlf_line_endings() {
    let page = b"# TYPE a gauge\r\na{x=\"1\"} 2\r\nb 3\r\n";
    let (samples, scan) = collect(page);
    assert_eq!(scan.skipped, 0);
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0].labels, labels(&[("x", "1")]));
    assert_eq!(samples[1].value, 3.0);
}

#[test]
fn openmetrics_unit_eof_created_and_exemplars() {
    let page = "\
# TYPE vllm:generation_tokens counter
# UNIT vllm:generation_tokens tokens
# HELP vllm:generation_tokens Generated tokens.
vllm:generation_tokens_total{model_name=\"m\"} 1200.0
vllm:generation_tokens_created{model_name=\"m\"} 1.7e9
# TYPE ttft histogram
ttft_bucket{le=\"0.5\"} 3 # {trace_id=\"abc\"} 0.4 1700000000.5
ttft_bucket{le=\"+Inf\"} 4
# EOF
";
    let (samples, scan) = collect(page.as_bytes());
    assert_eq!(scan.skipped, 0, "{:?}", scan.errors);
    assert!(scan.eof);
    let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "vllm:generation_tokens_total",
            "vllm:generation_tokens_created",
            "ttft_bucket",
            "ttft_bucket"
        ]
    );
    assert_eq!(samples[2].value, 3.0);
}

#[test]
fn text_after_eof_is_an_error() {
    let (samples, scan) = collect(b"a 1\n# EOF\nb 2\n");
    assert_eq!(samples.len(), 1);
    assert_eq!(scan.errors[0].kind, LineErrorKind::AfterEof);
    assert_eq!(scan.errors[0].line, 3);
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let page = "# just a comment\n\n   \n#\n# HELP a some help, with \"quotes\"\na 1\n";
    let (samples, scan) = collect(page.as_bytes());
    assert_eq!((samples.len(), scan.skipped, scan.lines), (1, 0, 6));
}

#[test]
fn malformed_lines() {
    assert_eq!(bad("{a=\"1\"} 1"), LineErrorKind::NoMetricName);
    assert_eq!(bad("9m 1"), LineErrorKind::NoMetricName);
    assert_eq!(bad("m-x 1"), LineErrorKind::BadMetricName);
    assert_eq!(bad("m"), LineErrorKind::MissingValue);
    assert_eq!(bad("m{a=\"1\"}"), LineErrorKind::MissingValue);
    assert_eq!(bad("m one"), LineErrorKind::BadValue);
    assert_eq!(bad("m 1 2 3"), LineErrorKind::TrailingText);
    assert_eq!(bad("m{a=\"1\" 1"), LineErrorKind::MissingComma);
    assert_eq!(bad("m{a=\"1\""), LineErrorKind::UnclosedLabels);
    assert_eq!(bad("m{a=\"\\q\"} 1"), LineErrorKind::BadEscape);
    assert_eq!(bad("m 1 # nope"), LineErrorKind::BadExemplar);
    assert_eq!(bad("# TYPE m"), LineErrorKind::BadTypeLine);
    assert_eq!(bad("# TYPE m flavour"), LineErrorKind::UnknownType);
    assert_eq!(bad("# HELP"), LineErrorKind::BadMetadataLine);
}

#[test]
fn invalid_utf8_is_a_bad_line_not_a_bad_page() {
    let mut page = b"a 1\nb{x=\"".to_vec();
    page.extend_from_slice(&[0xff, 0xfe]);
    page.extend_from_slice(b"\"} 2\nc 3\n");
    let (samples, scan) = collect(&page);
    assert_eq!(samples.len(), 2);
    assert_eq!(scan.errors[0].kind, LineErrorKind::NotUtf8);
    assert_eq!(scan.errors[0].line, 2);
}

#[test]
fn bad_lines_are_counted_and_the_rest_survives() {
    let page = "a 1\nb two\nc{ 3\nd 4\n";
    let (samples, scan) = collect(page.as_bytes());
    assert_eq!(samples.len(), 2);
    assert_eq!(scan.skipped, 2);
    assert_eq!(
        scan.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
        [2, 3]
    );
    assert!(!scan.unusable());
    let (_, scan) = collect(b"x y\nz\n");
    assert!(scan.unusable());
}

#[test]
fn recorded_errors_are_bounded() {
    let page = "bad line\n".repeat(MAX_RECORDED_ERRORS * 3);
    let (_, scan) = collect(page.as_bytes());
    assert_eq!(scan.skipped, MAX_RECORDED_ERRORS * 3);
    assert_eq!(scan.errors.len(), MAX_RECORDED_ERRORS);
}

#[test]
fn visitor_sees_only_wanted_names() {
    struct Only(Vec<f64>);
    impl Visitor for Only {
        fn wants(&mut self, name: &str) -> bool {
            name == "keep"
        }
        fn sample(&mut self, sample: &Sample<'_>) {
            self.0.push(sample.value);
        }
    }
    let mut only = Only(Vec::new());
    let scan = scan(b"keep 1\ndrop{a=\"b\"} 2\nkeep{x=\"y\"} 3\n", &mut only);
    assert_eq!(only.0, [1.0, 3.0]);
    assert_eq!(scan.samples, 3);
}

#[test]
fn sample_label_lookup() {
    struct First(Option<String>);
    impl Visitor for First {
        fn wants(&mut self, _: &str) -> bool {
            true
        }
        fn sample(&mut self, sample: &Sample<'_>) {
            self.0 = sample.label("le").map(|v| v.into_owned());
        }
    }
    let mut first = First(None);
    scan(b"h_bucket{a=\"1\",le=\"0.5\"} 1", &mut first);
    assert_eq!(first.0.as_deref(), Some("0.5"));
}

#[test]
fn blanks_and_tabs_between_tokens() {
    let s = one("  m\t{ a = \"1\" }\t 2 \t 1000 ");
    assert_eq!((s.value, s.timestamp), (2.0, Some(1000.0)));
}
