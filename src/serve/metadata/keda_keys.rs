//! The keys of an `external` or `external-push` trigger that KEDA reads itself: where it dials
//! the scaler and how (TLS), and the certificates a TriggerAuthentication gives it. KEDA
//! forwards the trigger's metadata keys to the scaler in every call, so the metadata reader
//! accepts and ignores them (by this table); the certificates never reach the scaler. The scaler
//! page's parameter list and authentication parameters are rendered from here and from the
//! target and policy key tables (`src/cli/trigger_reference.rs`).

/// Where a KEDA key is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KedaPlace {
    /// The trigger's `metadata`.
    Trigger,
    /// A TriggerAuthentication's `secretTargetRef` parameter (never forwarded to the scaler).
    Authentication,
    /// A key KEDA no longer reads, still accepted so an old ScaledObject keeps working.
    Removed,
}

/// One key KEDA reads itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KedaKey {
    pub name: &'static str,
    pub place: KedaPlace,
    pub required: bool,
    /// The values it takes, as written in the reference; empty when any text.
    pub values: &'static str,
    /// KEDA's default; empty when there is none.
    pub default: &'static str,
    pub doc: &'static str,
}

/// Every key KEDA reads itself, in the order the reference lists them.
pub const KEDA_KEYS: &[KedaKey] = &[
    KedaKey {
        name: "scalerAddress",
        place: KedaPlace::Trigger,
        required: true,
        values: "",
        default: "",
        doc: "where KEDA reaches `infscale serve`, as host:port; the shipped scaler is \
              `infscale.infscale.svc:9090` (KEDA's own key: infscale ignores it)",
    },
    KedaKey {
        name: "enableTLS",
        place: KedaPlace::Trigger,
        required: false,
        values: "true, false",
        default: "false",
        doc: "KEDA dials the scaler over TLS, with the CA and client certificate of the \
              trigger's TriggerAuthentication (below); the scaler must then run with \
              `--tls-cert` and `--tls-key` (`manifests/scaler-tls`)",
    },
    KedaKey {
        name: "unsafeSsl",
        place: KedaPlace::Trigger,
        required: false,
        values: "true, false",
        default: "false",
        doc: "KEDA skips verifying the scaler's certificate (for a test cluster only)",
    },
    KedaKey {
        name: "caCert",
        place: KedaPlace::Authentication,
        required: false,
        values: "",
        default: "",
        doc: "the CA certificate (PEM) KEDA verifies the scaler's certificate with",
    },
    KedaKey {
        name: "tlsClientCert",
        place: KedaPlace::Authentication,
        required: false,
        values: "",
        default: "",
        doc: "the client certificate (PEM) KEDA presents to the scaler; needed when the \
              scaler runs with `--tls-client-ca` (mutual TLS, as `manifests/scaler-tls` does)",
    },
    KedaKey {
        name: "tlsClientKey",
        place: KedaPlace::Authentication,
        required: false,
        values: "",
        default: "",
        doc: "the private key (PEM) of `tlsClientCert`",
    },
    KedaKey {
        name: "tlsCertFile",
        place: KedaPlace::Removed,
        required: false,
        values: "",
        default: "",
        doc: "removed from KEDA in 2.17; accepted and ignored",
    },
];

/// Whether KEDA reads the metadata key `name` itself (or resolves it, for keys ending in
/// `FromEnv`), so the scaler ignores it.
pub fn is_kedas(name: &str) -> bool {
    KEDA_KEYS.iter().any(|k| k.name == name) || name.ends_with("FromEnv")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kedas_keys_are_unique_and_not_infscales() {
        for (i, k) in KEDA_KEYS.iter().enumerate() {
            assert!(KEDA_KEYS[i + 1..].iter().all(|o| o.name != k.name));
            assert!(super::super::keys().all(|own| own != k.name), "{}", k.name);
        }
        assert!(is_kedas("scalerAddress") && is_kedas("thresholdFromEnv"));
        assert!(!is_kedas("threshold"));
    }
}
