//! Prometheus' `/api/v1/query_range` answer read into plain series, so the trace builder works on
//! numbers and its tests need no server: a JSON matrix in, `(labels, [(time, value)])` out, every
//! way the answer can be wrong named.

use std::collections::BTreeMap;

/// One series of a range query: its labels and its samples, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    /// `(unix seconds, value)`; non-finite values (NaN, ±Inf) are left out.
    pub points: Vec<(f64, f64)>,
}

/// Reads a `query_range` answer: the matrix of a successful query, or the error Prometheus gave.
pub fn parse_matrix(body: &str) -> Result<Vec<Series>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    match v.get("status").and_then(|s| s.as_str()) {
        Some("success") => {}
        Some("error") => {
            let kind = v.get("errorType").and_then(|s| s.as_str()).unwrap_or("?");
            let what = v
                .get("error")
                .and_then(|s| s.as_str())
                .unwrap_or("no message");
            return Err(format!("Prometheus refused the query ({kind}): {what}"));
        }
        _ => return Err("the answer has no \"status\" of success or error".to_owned()),
    }
    let data = v.get("data").ok_or("the answer has no \"data\"")?;
    match data.get("resultType").and_then(|s| s.as_str()) {
        Some("matrix") => {}
        other => return Err(format!("expected a matrix result, got {other:?}")),
    }
    let result = data
        .get("result")
        .and_then(|r| r.as_array())
        .ok_or("the answer's data has no \"result\" list")?;
    result
        .iter()
        .enumerate()
        .map(|(i, s)| series(i, s))
        .collect()
}

fn series(i: usize, s: &serde_json::Value) -> Result<Series, String> {
    let mut labels = BTreeMap::new();
    if let Some(m) = s.get("metric").and_then(|m| m.as_object()) {
        for (k, v) in m {
            labels.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
        }
    }
    let values = s
        .get("values")
        .and_then(|v| v.as_array())
        .ok_or_else(|| format!("series {i} has no \"values\" list"))?;
    let mut points = Vec::with_capacity(values.len());
    for p in values {
        let bad = || format!("series {i}: a sample is not [time, \"value\"]: {p}");
        let pair = p.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
        let t = pair[0].as_f64().filter(|t| t.is_finite()).ok_or_else(bad)?;
        let v: f64 = pair[1]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        if v.is_finite() {
            points.push((t, v));
        }
    }
    Ok(Series { labels, points })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_reads_as_series() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x","pod":"a"},"values":[[10,"1"],[11.5,"NaN"],[12,"3"]]}]}}"#;
        let s = parse_matrix(body).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].labels["pod"], "a");
        assert_eq!(s[0].points, vec![(10.0, 1.0), (12.0, 3.0)]);
    }

    #[test]
    fn every_bad_answer_is_named() {
        let cases = [
            ("not json", "not JSON"),
            (
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                "parse error",
            ),
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
                "matrix",
            ),
            (r#"{"status":"success"}"#, "no \"data\""),
            (r#"{"x":1}"#, "status"),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1]]}]}}"#,
                "not [time",
            ),
            (
                r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,"a"]]}]}}"#,
                "not [time",
            ),
        ];
        for (body, want) in cases {
            let e = parse_matrix(body).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
