//! Reading EndpointSlices one way everywhere: the scaler following the activator's pods, the
//! activator following a model's pods, and serve mode listing the activator pods it puts in a
//! model's path all read who manages a slice, which endpoints are ready, their addresses and
//! their port through these; and the pods a slice's endpoints must be (the Running pods its
//! Service selects) are read one way too.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use std::collections::BTreeMap;

/// The label naming a slice's Service.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming who manages a slice.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The EndpointSlice controller's name, on the slices it writes for a Service's pods.
pub const CONTROLLER: &str = "endpointslice-controller.k8s.io";
/// infscale's name, on the slices that put the activator in a model Service's path (serve
/// mode). They are never counted as replicas, and the activator never forwards to them.
pub const INFSCALE: &str = "infscale.io";

/// The annotation on infscale's slice that carries the trigger's `maxHeld` to the activator.
pub const MAX_HELD_ANNOTATION: &str = "infscale.io/max-held";

/// The annotation on infscale's slice that carries the trigger's `holdTimeoutSeconds`.
pub const HOLD_TIMEOUT_ANNOTATION: &str = "infscale.io/hold-timeout-seconds";

fn label<'a>(slice: &'a EndpointSlice, key: &str) -> Option<&'a str> {
    slice.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Whether the EndpointSlice controller wrote this slice for Service `service` (a watch may ask
/// for these only; checked again, whatever the API answered).
pub fn managed_for(slice: &EndpointSlice, service: &str) -> bool {
    label(slice, SERVICE_NAME) == Some(service) && label(slice, MANAGED_BY) == Some(CONTROLLER)
}

/// Whether the slice is one of infscale's own.
pub fn infscales(slice: &EndpointSlice) -> bool {
    label(slice, MANAGED_BY) == Some(INFSCALE)
}

/// An endpoint with no readiness condition is ready (the API's own rule).
pub fn endpoint_ready(e: &Endpoint) -> bool {
    e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
}

/// An endpoint's address as a URL host, if it is an IP address of the slice's type (an FQDN
/// would send the reader wherever a name resolves) that a pod may have ([`unicast`]).
pub fn ip_host(address: &str, address_type: &str) -> Option<String> {
    match (address.parse::<std::net::IpAddr>().ok()?, address_type) {
        (ip @ std::net::IpAddr::V4(_), "IPv4") if unicast(ip) => Some(ip.to_string()),
        (ip @ std::net::IpAddr::V6(_), "IPv6") if unicast(ip) => Some(format!("[{ip}]")),
        _ => None,
    }
}

/// Whether `ip` may be a pod's address at all: not unspecified (`0.0.0.0/8`, `::`), not a
/// broadcast, multicast or link-local address (`169.254.0.0/16`, where cloud metadata
/// services answer; `fe80::/10`). Loopback is the reader's own host: see [`pod_ip`].
pub fn unicast(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            !(v4.octets()[0] == 0 || v4.is_broadcast() || v4.is_multicast() || v4.is_link_local())
        }
        std::net::IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            let mapped = v6.to_ipv4_mapped().is_some_and(|v4| !unicast(v4.into()));
            !(v6.is_unspecified() || v6.is_multicast() || link_local || mapped)
        }
    }
}

/// Whether `ip` is an address a pod of the cluster may have: [`unicast`], and not loopback
/// unless `loopback` (a cluster on one machine's loopback, as the tests' stand-in).
pub fn pod_ip(ip: std::net::IpAddr, loopback: bool) -> bool {
    let lo = match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    unicast(ip) && (loopback || !lo)
}

/// A Service's selector as the API's `labelSelector` (`k=v,k2=v2`).
pub fn selector_query(selector: &BTreeMap<String, String>) -> String {
    let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.join(",")
}

/// The IP addresses (as written in the pod's status) of the Running pods among `pods` that carry
/// every label of `selector`: checked again, whatever the API's list answered.
pub fn running_pod_ips<'a>(
    pods: &'a [Pod],
    selector: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = String> + 'a {
    pods.iter()
        .filter(move |p| {
            let have = p.metadata.labels.as_ref();
            selector
                .iter()
                .all(|(k, v)| have.and_then(|l| l.get(k)) == Some(v))
        })
        .filter_map(|p| p.status.as_ref())
        .filter(|s| s.phase.as_deref() == Some("Running"))
        .flat_map(|s| {
            let many = s.pod_ips.iter().flatten().map(|ip| ip.ip.clone());
            s.pod_ip.clone().into_iter().chain(many)
        })
}

/// The hosts of the slice's ready endpoints ([`ip_host`]).
pub fn ready_hosts(slice: &EndpointSlice) -> impl Iterator<Item = String> + '_ {
    slice
        .endpoints
        .iter()
        .flatten()
        .filter(|e| endpoint_ready(e))
        .flat_map(|e| &e.addresses)
        .filter_map(|a| ip_host(a, &slice.address_type))
}

/// The slice's port named `name`, or its only port.
pub fn port(slice: &EndpointSlice, name: Option<&str>) -> Option<u16> {
    let ports = slice.ports.as_deref().unwrap_or_default();
    ports
        .iter()
        .find(|p| name.is_some() && p.name.as_deref() == name)
        .or_else(|| (ports.len() == 1).then(|| &ports[0]))
        .and_then(|p| p.port)
        .and_then(|p| u16::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ip_addresses_of_the_slices_type_are_hosts() {
        assert_eq!(ip_host("10.0.0.7", "IPv4").as_deref(), Some("10.0.0.7"));
        assert_eq!(ip_host("fd00::7", "IPv6").as_deref(), Some("[fd00::7]"));
        for (address, kind) in [
            ("localhost", "FQDN"),
            ("10.0.0.7", "FQDN"),
            ("fd00::7", "IPv4"),
            ("10.0.0.7", "IPv6"),
            ("act.example.com", "IPv4"),
            ("10.0.0.7:80", "IPv4"),
            ("0.0.0.0", "IPv4"),
            ("0.1.2.3", "IPv4"),
            ("169.254.169.254", "IPv4"),
            ("255.255.255.255", "IPv4"),
            ("224.0.0.1", "IPv4"),
            ("::", "IPv6"),
            ("fe80::1", "IPv6"),
            ("ff02::1", "IPv6"),
            ("::ffff:169.254.169.254", "IPv6"),
        ] {
            assert_eq!(ip_host(address, kind), None, "{address} {kind}");
        }
    }

    #[test]
    fn loopback_is_a_pod_address_only_on_a_loopback_cluster() {
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert!(!pod_ip(lo, false) && pod_ip(lo, true));
        assert!(!pod_ip("::1".parse().unwrap(), false));
        assert!(pod_ip("10.0.0.7".parse().unwrap(), false));
        assert!(!pod_ip("169.254.169.254".parse().unwrap(), true));
    }
}
