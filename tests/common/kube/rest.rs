//! The API stand-in's answers: `/version`; list, watch, get, create, replace, patch and delete
//! of any object in the store, by namespace or cluster-wide, lists and watches selected by
//! equality labels; a Deployment's scale subresource; and the pod proxy.

use super::proxy::proxy;
use super::store::{kind_at, Cluster, Key, Refused};
use super::watch::watch;
use crate::common::http::{json, kube_not_found, kube_version, respond, RequestHead};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A request path, split as the API routes it.
struct Target {
    base: String,
    ns: Option<String>,
    resource: String,
    name: Option<String>,
    /// What follows the name: `scale`, `proxy/metrics`, ...
    sub: Option<String>,
}

fn target(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (base, mut rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => (format!("/api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("/apis/{g}/{v}"), rest),
        _ => return None,
    };
    let mut ns = None;
    if let ["namespaces", n, more @ ..] = rest {
        if !more.is_empty() {
            ns = Some((*n).to_owned());
            rest = more;
        }
    }
    let (resource, tail) = rest.split_first()?;
    Some(Target {
        base,
        ns,
        resource: (*resource).to_owned(),
        name: tail.first().map(|n| (*n).to_owned()),
        sub: (tail.len() > 1).then(|| tail[1..].join("/")),
    })
}

fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded value of `key=` in a query.
fn query(q: &str, key: &str) -> Option<String> {
    q.split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .map(decode)
}

/// Whether `object`'s labels satisfy a label selector's equality terms (`k=v`, `k==v`, `k!=v`,
/// `k`, `!k`); set terms (`in`, `notin`) are not read.
fn selected(selector: Option<&str>, object: &serde_json::Value) -> bool {
    let labels = &object["metadata"]["labels"];
    selector
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty() && !t.contains(" in ") && !t.contains(" notin "))
        .all(|t| {
            if let Some((k, v)) = t.split_once("!=") {
                labels[k.trim()] != v.trim()
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                labels[k.trim()] == v.trim()
            } else if let Some(k) = t.strip_prefix('!') {
                labels[k].is_null()
            } else {
                !labels[t].is_null()
            }
        })
}

fn list_kind(resource: &str) -> &'static str {
    match resource {
        "pods" => "PodList",
        "services" => "ServiceList",
        "deployments" => "DeploymentList",
        "endpointslices" => "EndpointSliceList",
        "leases" => "LeaseList",
        _ => "List",
    }
}

fn status(stream: &mut TcpStream, code: u16, reason: &str, message: &str) {
    json(
        stream,
        code,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": reason, "code": code, "message": message}),
    );
}

/// A create's or a replace's refusal, as the API server answers it.
fn refused(stream: &mut TcpStream, why: Refused, resource: &str, name: &str) {
    match why {
        Refused::AlreadyExists => status(
            stream,
            409,
            "AlreadyExists",
            &format!("{resource} \"{name}\" already exists"),
        ),
        Refused::NotFound => kube_not_found(stream, name),
        Refused::Conflict { stored, sent } => status(
            stream,
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                 modified (resourceVersion {sent}, stored {stored}); please apply your changes to \
                 the latest version and try again"
            ),
        ),
    }
}

/// The body of a create or a replace at `key`, as the object to store: its kind and
/// apiVersion those of the path when it names none, its namespace the path's. `Err` is the
/// 400 or 422 the API server would answer.
fn body_at(body: &[u8], key: &Key) -> Result<serde_json::Value, (u16, &'static str, String)> {
    let Ok(mut object) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Err((400, "BadRequest", "the body is not JSON".to_owned()));
    };
    if !object.is_object() {
        return Err((400, "BadRequest", "the body is not an object".to_owned()));
    }
    let Some(kind) = kind_at(&key.base, &key.resource) else {
        return Err((404, "NotFound", format!("{} not found", key.resource)));
    };
    if object["kind"].is_null() {
        object["kind"] = serde_json::json!(kind);
    }
    if object["kind"] != kind {
        return Err((400, "BadRequest", format!("the body is not a {kind}")));
    }
    if object["apiVersion"].is_null() {
        let version = key
            .base
            .trim_start_matches("/api/")
            .trim_start_matches("/apis/");
        object["apiVersion"] = serde_json::json!(version);
    }
    if object["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        return Err((422, "Invalid", "metadata.name: Required value".to_owned()));
    }
    match object["metadata"]["namespace"].as_str() {
        Some(ns) if ns != key.ns => {
            return Err((
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the \
                 request"
                    .to_owned(),
            ))
        }
        _ => object["metadata"]["namespace"] = serde_json::json!(key.ns),
    }
    Ok(object)
}

/// RFC 7386: `patch` merged into `into`.
pub fn merge(into: &mut serde_json::Value, patch: &serde_json::Value) {
    let Some(fields) = patch.as_object() else {
        *into = patch.clone();
        return;
    };
    if !into.is_object() {
        *into = serde_json::json!({});
    }
    for (k, v) in fields {
        if v.is_null() {
            if let Some(o) = into.as_object_mut() {
                o.remove(k);
            }
        } else {
            merge(&mut into[k.as_str()], v);
        }
    }
}

/// Answers one request against `cluster`.
pub fn answer(cluster: &Cluster, mut stream: TcpStream, head: RequestHead, stop: &AtomicBool) {
    let (path, q) = head
        .target
        .split_once('?')
        .unwrap_or((head.target.as_str(), ""));
    if path == "/version" {
        return kube_version(&mut stream);
    }
    if path.starts_with("/apis/coordination.k8s.io/") && cluster.state().no_leases {
        // An API server that does not serve a group answers its paths as any unknown path.
        return respond(&mut stream, 404, "text/plain", b"404 page not found\n");
    }
    let Some(t) = target(path) else {
        return kube_not_found(&mut stream, path);
    };
    let in_scope = |k: &Key| {
        k.base == t.base && k.resource == t.resource && t.ns.as_ref().is_none_or(|n| *n == k.ns)
    };
    let key = |name: &str| Key {
        base: t.base.clone(),
        ns: t.ns.clone().unwrap_or_default(),
        resource: t.resource.clone(),
        name: name.to_owned(),
    };
    let selector = query(q, "labelSelector");
    let wanted = |k: &Key, v: &serde_json::Value| in_scope(k) && selected(selector.as_deref(), v);
    let writes = matches!(head.method.as_str(), "PATCH" | "DELETE" | "POST" | "PUT");
    if writes && cluster.state().refuse_writes {
        return status(
            &mut stream,
            500,
            "InternalError",
            "etcdserver: request timed out",
        );
    }
    if writes && t.resource == "endpointslices" && cluster.state().forbid_slice_writes {
        return status(
            &mut stream,
            403,
            "Forbidden",
            "endpointslices.discovery.k8s.io is forbidden: User \"system:serviceaccount:infscale:infscale\" cannot patch resource \"endpointslices\"",
        );
    }
    match (head.method.as_str(), t.name.as_deref(), t.sub.as_deref()) {
        ("GET", None, _) if query(q, "watch").as_deref() == Some("true") => {
            let from = query(q, "resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            watch(cluster, &mut stream, from, &wanted, stop);
        }
        ("GET", None, _) => {
            let mut s = cluster.state();
            let until = Instant::now() + Duration::from_secs(60);
            while s.hold_lists && !stop.load(Ordering::SeqCst) && Instant::now() < until {
                s = cluster
                    .0
                     .1
                    .wait_timeout(s, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            let items: Vec<&serde_json::Value> = s
                .objects
                .iter()
                .filter(|(k, v)| wanted(k, v))
                .map(|(_, v)| v)
                .collect();
            let body = serde_json::json!({"apiVersion": t.base.trim_start_matches("/api/")
                .trim_start_matches("/apis/"), "kind": list_kind(&t.resource),
                "metadata": {"resourceVersion": s.rv.to_string()}, "items": items});
            drop(s);
            json(&mut stream, 200, body);
        }
        ("GET", Some(name), Some(sub)) if t.resource == "pods" && sub.starts_with("proxy") => {
            proxy(cluster, &mut stream, &key(name), &sub["proxy".len()..]);
        }
        ("GET", Some(name), None) => match cluster.state().objects.get(&key(name)).cloned() {
            Some(v) => json(&mut stream, 200, v),
            None => kube_not_found(&mut stream, name),
        },
        ("PATCH", Some(name), Some("scale")) if t.resource == "deployments" => {
            let body: serde_json::Value = serde_json::from_slice(&head.body).unwrap_or_default();
            let Some(n) = body["spec"]["replicas"].as_u64() else {
                return status(&mut stream, 422, "Invalid", "no spec.replicas");
            };
            let mut s = cluster.state();
            let Some(mut d) = s.objects.get(&key(name)).cloned() else {
                drop(s);
                return kube_not_found(&mut stream, name);
            };
            d["spec"]["replicas"] = serde_json::json!(n);
            d["status"]["replicas"] = serde_json::json!(n);
            let app = d["spec"]["selector"]["matchLabels"]["app"].clone();
            s.put(d);
            drop(s);
            cluster.0 .1.notify_all();
            json(
                &mut stream,
                200,
                serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": name, "namespace": t.ns},
                    "spec": {"replicas": n},
                    "status": {"replicas": n, "selector": format!("app={}", app.as_str().unwrap_or(""))}}),
            );
        }
        ("PATCH", Some(name), None) => {
            let Ok(body) = serde_json::from_slice::<serde_json::Value>(&head.body) else {
                return status(&mut stream, 400, "BadRequest", "the body is not JSON");
            };
            let apply = head
                .headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("apply-patch"));
            let mut s = cluster.state();
            let object = if apply {
                if body["metadata"]["name"] != name {
                    drop(s);
                    return status(&mut stream, 422, "Invalid", "the name is not the path's");
                }
                let mut object = body;
                object["metadata"]["namespace"] = serde_json::json!(t.ns);
                object
            } else {
                let Some(mut object) = s.objects.get(&key(name)).cloned() else {
                    drop(s);
                    return kube_not_found(&mut stream, name);
                };
                merge(&mut object, &body);
                object
            };
            let stored = s.put(object);
            drop(s);
            cluster.0 .1.notify_all();
            json(&mut stream, 200, stored);
        }
        ("POST", None, _) => {
            let Some(ns) = t.ns.as_deref() else {
                return kube_not_found(&mut stream, path);
            };
            let at = Key {
                base: t.base.clone(),
                ns: ns.to_owned(),
                resource: t.resource.clone(),
                name: String::new(),
            };
            let object = match body_at(&head.body, &at) {
                Ok(object) => object,
                Err((code, reason, message)) => return status(&mut stream, code, reason, &message),
            };
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let created = cluster.state().create(object);
            match created {
                Ok(stored) => {
                    cluster.0 .1.notify_all();
                    json(&mut stream, 201, stored);
                }
                Err(why) => refused(&mut stream, why, &t.resource, &name),
            }
        }
        ("PUT", Some(name), None) => {
            let object = match body_at(&head.body, &key(name)) {
                Ok(object) => object,
                Err((code, reason, message)) => return status(&mut stream, code, reason, &message),
            };
            if object["metadata"]["name"] != name {
                return status(&mut stream, 422, "Invalid", "the name is not the path's");
            }
            let replaced = cluster.state().replace(object);
            match replaced {
                Ok(stored) => {
                    cluster.0 .1.notify_all();
                    json(&mut stream, 200, stored);
                }
                Err(why) => refused(&mut stream, why, &t.resource, name),
            }
        }
        ("DELETE", Some(name), None) => {
            let gone = cluster.state().delete(&key(name));
            cluster.0 .1.notify_all();
            if gone {
                json(
                    &mut stream,
                    200,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Success", "code": 200}),
                );
            } else {
                kube_not_found(&mut stream, name);
            }
        }
        _ => kube_not_found(&mut stream, path),
    }
}
