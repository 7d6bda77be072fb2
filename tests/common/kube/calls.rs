//! What the Kubernetes API stand-in records of each request, and the RBAC rule a request needs,
//! so a test can hold the manifests' RBAC to exactly the calls the code makes.

use std::time::Instant;

/// One request as the API saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    /// The Authorization header, if one came.
    pub authorization: Option<String>,
    /// The Content-Type header, if one came.
    pub content_type: Option<String>,
    /// The request body, as text.
    pub body: String,
    /// When the request was read.
    pub at: Instant,
}

impl Call {
    /// Whether this is a watch (a GET with `watch=true`).
    pub fn is_watch(&self) -> bool {
        self.method == "GET" && self.query.split('&').any(|kv| kv == "watch=true")
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_default()
    }

    /// `(apiGroup, resource, verb)` as RBAC names it (a POST is `create`, a PUT `update`);
    /// `None` for non-resource paths.
    pub fn rbac(&self) -> Option<(String, String, String)> {
        let parts: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (resource, name, sub) = match rest {
            ["namespaces", _, resource] => (*resource, None, None),
            ["namespaces", _, resource, name] => (*resource, Some(*name), None),
            ["namespaces", _, resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
            [resource] => (*resource, None, None),
            _ => return None,
        };
        let verb = match (self.method.as_str(), name) {
            ("GET", None) if self.is_watch() => "watch",
            ("GET", None) => "list",
            ("GET", Some(_)) => "get",
            ("PATCH", _) => "patch",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("DELETE", Some(_)) => "delete",
            ("DELETE", None) => "deletecollection",
            (m, _) => return Some((group.into(), resource.into(), m.to_lowercase())),
        };
        let resource = match sub {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        };
        Some((group.to_owned(), resource, verb.to_owned()))
    }
}
