//! Connecting to the Kubernetes API, the same way for `serve`, `activator` and `kube`.

use anyhow::Context;

/// A client for `api` (a URL used without credentials, e.g. a stand-in or `kubectl proxy`), or
/// else the in-cluster service account or the kubeconfig.
pub async fn connect(api: Option<&str>) -> anyhow::Result<kube::Client> {
    match api {
        Some(url) => {
            let uri: http::Uri = url.parse().with_context(|| format!("--kube-api {url:?}"))?;
            Ok(kube::Client::try_from(kube::Config::new(uri))?)
        }
        None => kube::Client::try_default()
            .await
            .context("no Kubernetes API: not in a cluster and no usable kubeconfig"),
    }
}
