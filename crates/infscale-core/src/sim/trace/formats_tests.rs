//! The published formats read from the fixtures, told apart, and refused line by line.

use super::*;

const MOONCAKE: &str = include_str!("../../../../../fixtures/traces/mooncake.jsonl");
const BURSTGPT: &str = include_str!("../../../../../fixtures/traces/burstgpt.csv");
const AZURE: &str = include_str!("../../../../../fixtures/traces/azure.csv");

fn rows(t: &Trace) -> Vec<(f64, u32, u32)> {
    t.requests
        .iter()
        .map(|r| (r.arrival, r.prompt, r.output))
        .collect()
}

#[test]
fn mooncake_reads_milliseconds_sorted_from_zero() {
    let t = mooncake("m.jsonl", MOONCAKE, None).unwrap();
    assert_eq!(
        rows(&t),
        [
            (0.0, 600, 20),
            (0.5, 1200, 40),
            (1.0, 900, 100),
            (2.25, 300, 8)
        ]
    );
    assert_eq!(t.duration, 123.0);
    assert_eq!(t.name, "m.jsonl");
}

#[test]
fn burstgpt_skips_failed_requests_in_a_note() {
    let r = burstgpt("b.csv", BURSTGPT, None).unwrap();
    assert_eq!(
        rows(&r.trace),
        [(0.0, 472, 18), (113.0, 417, 276), (125.0, 1360, 221)]
    );
    assert_eq!(
        r.notes,
        ["b.csv: skipped 1 failed request (0 response tokens)"]
    );
}

#[test]
fn azure_reads_datetimes_to_the_tick() {
    let t = azure("a.csv", AZURE, Some(60.0)).unwrap();
    let expected = [
        (0.0, 374, 44),
        (4.314579, 396, 109),
        (4.31941, 879, 15),
        (19.400187, 2082, 214),
    ];
    assert_eq!(t.requests.len(), expected.len());
    for (got, want) in rows(&t).iter().zip(expected) {
        assert!((got.0 - want.0).abs() < 1e-9, "{got:?} vs {want:?}");
        assert_eq!((got.1, got.2), (want.1, want.2));
    }
    assert_eq!(t.duration, 60.0);
}

#[test]
fn formats_are_told_apart_by_extension_and_first_line() {
    assert_eq!(detect("x.jsonl", MOONCAKE), Format::Mooncake);
    assert_eq!(detect("x.csv", BURSTGPT), Format::BurstGpt);
    assert_eq!(detect("x.csv", AZURE), Format::Azure);
    assert_eq!(
        detect("x", "\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens\n"),
        Format::Azure
    );
    assert_eq!(
        detect("x.csv", "time_s,prompt_tokens,output_tokens\n1,2,3\n"),
        Format::Csv
    );
    assert_eq!(detect("x.csv", "1,2,3\n"), Format::Csv);
    assert_eq!(detect("x.csv", ""), Format::Csv);
    assert_eq!(detect("day.yaml", "anything"), Format::Scenario);
    assert_eq!(detect("day.yml", "anything"), Format::Scenario);
    assert_eq!(
        detect("day", "# my day\nname: day\nduration: 60\n"),
        Format::Scenario
    );
    assert_eq!(detect("day", "---\nname: day\n"), Format::Scenario);
    assert_eq!("burstgpt".parse::<Format>(), Ok(Format::BurstGpt));
    for name in FORMAT_NAMES {
        assert!(name.parse::<Format>().is_ok(), "{name}");
    }
    assert!("parquet".parse::<Format>().is_err());
}

#[test]
fn read_detects_or_obeys_the_format() {
    let auto = read(Format::Auto, "m.jsonl", MOONCAKE, None).unwrap();
    assert_eq!(auto.trace, mooncake("m.jsonl", MOONCAKE, None).unwrap());
    let named = read(Format::BurstGpt, "b", BURSTGPT, None).unwrap();
    assert_eq!(named.notes.len(), 1);
    // A format named against the file's content fails on the header, not silently.
    let e = read(Format::Azure, "b.csv", BURSTGPT, None).unwrap_err();
    assert!(
        e.0.starts_with("b.csv:1: the header has no \"contexttokens\""),
        "{e}"
    );
    assert!(read(Format::Scenario, "s", "name: s", None).is_err());
}

/// Each bad line's error, by reader: (text, the error's start).
#[test]
fn bad_lines_name_file_line_and_fault() {
    let cases: [(Format, &str, &str); 12] = [
        (
            Format::Mooncake,
            "{\"timestamp\": 1, \"input_length\": 2, \"output_length\": 3}\n{\"timestamp\": 2, \"input_length\": 2}\n",
            "t:2: missing field `output_length`",
        ),
        (Format::Mooncake, "\n\nnot json\n", "t:3: expected"),
        (
            Format::Mooncake,
            "{\"timestamp\": -5, \"input_length\": 2, \"output_length\": 3}\n",
            "t:1: timestamp is not",
        ),
        (
            Format::Mooncake,
            "{\"timestamp\": 5, \"input_length\": -2, \"output_length\": 3}\n",
            "t:1: invalid value",
        ),
        (
            Format::Mooncake,
            "{\"timestamp\": 5, \"input_length\": 2, \"output_length\": 0}\n",
            "t:1: output_length must be at least 1",
        ),
        (
            Format::BurstGpt,
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490\n",
            "t:2: 5 fields where the header has 6",
        ),
        (
            Format::BurstGpt,
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,API log\nsoon,ChatGPT,1,1,2,API log\n",
            "t:3: Timestamp \"soon\"",
        ),
        (
            Format::BurstGpt,
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,-1,490,API log\n",
            "t:2: Response tokens \"-1\"",
        ),
        (
            Format::BurstGpt,
            "Timestamp,Model,Request tokens,Total tokens,Log Type\n",
            "t:1: the header has no \"response tokens\"",
        ),
        (
            Format::Azure,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-31 18:15:46,1,1\n",
            "t:3: TIMESTAMP \"2023-11-31 18:15:46\": no such date",
        ),
        (
            Format::Azure,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,0\n",
            "t:2: GeneratedTokens \"0\"",
        ),
        (Format::Azure, "\n\n", "t: empty, expected a header line"),
    ];
    for (format, text, start) in cases {
        let e = read(format, "t", text, None).unwrap_err().0;
        assert!(
            e.starts_with(start),
            "{format:?}: {e:?} should start {start:?}"
        );
    }
}

#[test]
fn an_empty_log_is_an_empty_trace() {
    let t = mooncake("m", "\n", None).unwrap();
    assert!(t.requests.is_empty());
    assert_eq!(t.duration, 120.0);
    let r = burstgpt(
        "b",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
        None,
    )
    .unwrap();
    assert!(r.trace.requests.is_empty() && r.notes.is_empty());
}
