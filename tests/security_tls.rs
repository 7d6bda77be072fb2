//! Security review: `serve`'s gRPC with mutual TLS refuses a client without a certificate, a
//! client whose certificate another CA signed, and plaintext; a client the CA vouches for is
//! served (the control).

mod common;

use common::keda::{client_over, object};
use common::scaler::{config, start};
use common::tls::{temp_dir, write, Pki};
use infscale::serve::server::{Config, TlsFiles};
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// Whether a client on `channel` (or the connect itself) is refused; within 10 s.
async fn refused(channel: Result<Channel, tonic::transport::Error>) -> bool {
    let Ok(channel) = channel else { return true };
    let mut client = client_over(channel);
    let call = client.get_metric_spec(object("chat", &[("threshold", "8".to_owned())]));
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(r) => r.is_err(),
        Err(_) => panic!("the call neither failed nor answered in 10 s"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_no_certificate_a_foreign_ca_and_plaintext() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("security-tls");
    let pki = Pki::new();
    let stranger = Pki::new();
    let (server_cert, server_key) = pki.issue(&["localhost", "127.0.0.1"]);
    let running = start(Config {
        tls: Some(TlsFiles {
            cert: write(&dir, "server.pem", &server_cert),
            key: write(&dir, "server.key", &server_key),
            client_ca: Some(write(&dir, "ca.pem", &pki.ca_pem())),
        }),
        ..config()
    })
    .await;
    let url = format!("https://{}", running.grpc);
    let base = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.ca_pem()))
        .domain_name("localhost");
    let connect = |tls: ClientTlsConfig| {
        let url = url.clone();
        async move {
            Channel::from_shared(url)
                .expect("url")
                .tls_config(tls)
                .expect("tls config")
                .connect_timeout(Duration::from_secs(5))
                .connect()
                .await
        }
    };

    // The control: a certificate the CA signed is served.
    let (cert, key) = pki.issue(&["keda-operator"]);
    let ok = connect(base.clone().identity(Identity::from_pem(&cert, &key))).await;
    assert!(
        !refused(ok).await,
        "a client the CA vouches for was refused"
    );

    // No client certificate.
    assert!(
        refused(connect(base.clone()).await).await,
        "a client without a certificate was served"
    );

    // A certificate another CA signed, for the same name.
    let (cert, key) = stranger.issue(&["keda-operator"]);
    let foreign = connect(base.clone().identity(Identity::from_pem(&cert, &key))).await;
    assert!(
        refused(foreign).await,
        "a client certificate from another CA was served"
    );

    // Plaintext HTTP/2 against the TLS port.
    let plain = Channel::from_shared(format!("http://{}", running.grpc))
        .expect("url")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    assert!(refused(plain).await, "plaintext was served");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_trusts_another_ca_does_not_talk_to_serve() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("security-tls-server");
    let pki = Pki::new();
    let (server_cert, server_key) = pki.issue(&["localhost"]);
    let running = start(Config {
        tls: Some(TlsFiles {
            cert: write(&dir, "server.pem", &server_cert),
            key: write(&dir, "server.key", &server_key),
            client_ca: None,
        }),
        ..config()
    })
    .await;
    let other = Pki::new();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(other.ca_pem()))
        .domain_name("localhost");
    let channel = Channel::from_shared(format!("https://{}", running.grpc))
        .expect("url")
        .tls_config(tls)
        .expect("tls config")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await;
    assert!(
        refused(channel).await,
        "a server the client's CA never signed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
