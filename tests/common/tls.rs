//! A throwaway PKI for TLS tests: a CA, certificates it signs, and the files `serve` reads.

use std::path::{Path, PathBuf};

/// A CA, and certificates it signs (PEM).
pub struct Pki {
    pub ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).expect("CA certificate");
        Pki { ca, ca_key }
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A certificate for `names`: (certificate PEM, key PEM).
    pub fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .expect("params")
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// A fresh directory under the system's temporary directory, named for `tag` and this process.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("infscale-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}
