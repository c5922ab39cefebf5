//! Building the API client, and reading ResourceClaims.

use std::path::Path;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::error::ApiError;
use crate::retry_after::RetryAfterLayer;

/// A client for the API server: from `kubeconfig` when given; otherwise the
/// in-cluster service account; otherwise `KUBECONFIG` or `~/.kube/config`.
///
/// kube's built-in retry of 429/503/504 answers is turned off: its default
/// goes on for minutes (15 retries, doubling from 5 ms), which would hide an
/// outage from the publisher's status and overrun a DRA prepare call's 45 s.
/// The publisher retries with its own backoff; callers of [`get_claim`]
/// decide for themselves. A layer carries a refusal's `Retry-After` header
/// into the `Status` kube parses, so it reaches [`ApiError::retry_after`].
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ApiError> {
    install_tls_provider();
    let mut config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| ApiError::Kubeconfig {
                path: path.to_owned(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => match Config::incluster() {
            Ok(config) => config,
            Err(in_cluster) => Config::from_kubeconfig(&KubeConfigOptions::default())
                .await
                .map_err(|kubeconfig| ApiError::NoConfiguration {
                    in_cluster,
                    kubeconfig,
                })?,
        },
    };
    config.default_retry = false;
    let builder =
        ClientBuilder::try_from(config).map_err(|source| ApiError::BuildClient { source })?;
    Ok(builder.with_layer(&RetryAfterLayer).build())
}

/// Reads the ResourceClaim `namespace/name`; `None` when there is none (404).
pub async fn get_claim(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<ResourceClaim>, ApiError> {
    Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|source| {
            ApiError::request(format!("reading ResourceClaim {namespace}/{name}"), source)
        })
}

/// Makes ring (what kube is built with here) the process's TLS provider,
/// unless one was chosen already: when another crate of the process links a
/// second provider, rustls refuses to pick one by itself and every TLS
/// connection would panic.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
