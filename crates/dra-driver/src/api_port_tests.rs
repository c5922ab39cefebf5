//! A test double of [`ApiPort`] answering from memory, used the way a
//! driver uses the port (`Arc<dyn ApiPort>`), and the messages of
//! [`ApiPortError`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{PoolTarget, PublisherHandle, WriteFence};

use super::{ApiPort, ApiPortError};
use crate::claim::{ClaimRef, StatusWrite};

/// Claims by `namespace/name`; `None`: the API server does not answer.
#[derive(Debug, Default)]
struct Memory {
    claims: Option<BTreeMap<String, ResourceClaim>>,
    writes: Mutex<Vec<StatusWrite>>,
}

impl ApiPort for Memory {
    fn read_claim(
        &self,
        claim: &ClaimRef,
    ) -> BoxFuture<'static, Result<Option<ResourceClaim>, ApiPortError>> {
        let answer = match &self.claims {
            Some(claims) => Ok(claims
                .get(&format!("{}/{}", claim.namespace, claim.name))
                .cloned()),
            None => Err(ApiPortError::NoAnswer {
                what: format!("reading ResourceClaim {}/{}", claim.namespace, claim.name),
                after: Duration::from_secs(10),
            }),
        };
        Box::pin(async move { answer })
    }

    fn write_status(&self, write: StatusWrite) -> BoxFuture<'static, Result<(), ApiPortError>> {
        self.writes.lock().unwrap().push(write);
        Box::pin(async { Ok(()) })
    }

    fn watch_claims(&self) -> futures::stream::BoxStream<'static, wdp_dra_client::ClaimEvent> {
        // Every claim, listed once; no change follows.
        use futures::StreamExt;
        let claims = self.claims.clone().unwrap_or_default();
        let mut events: Vec<wdp_dra_client::ClaimEvent> = claims
            .values()
            .map(|c| wdp_dra_client::ClaimEvent::Changed(Box::new(c.clone())))
            .collect();
        events.push(wdp_dra_client::ClaimEvent::Listed(
            claims
                .values()
                .filter_map(|c| c.metadata.uid.clone())
                .collect(),
        ));
        futures::stream::iter(events)
            .chain(futures::stream::pending())
            .boxed()
    }

    fn spawn_publisher(
        &self,
        _target: PoolTarget,
        _fence: WriteFence,
        _shutdown: &CancellationToken,
    ) -> PublisherHandle {
        unreachable!("no test here publishes")
    }
}

fn claim(name: &str) -> ClaimRef {
    ClaimRef {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

#[tokio::test]
async fn a_double_answers_through_the_port() {
    let mut object = ResourceClaim::default();
    object.metadata.uid = Some("uid-a".into());
    let memory = Arc::new(Memory {
        claims: Some(BTreeMap::from([("default/a".to_owned(), object)])),
        ..Memory::default()
    });
    let api: Arc<dyn ApiPort> = memory.clone();
    let found = api.read_claim(&claim("a")).await.unwrap().unwrap();
    assert_eq!(found.metadata.uid.as_deref(), Some("uid-a"));
    assert!(api.read_claim(&claim("b")).await.unwrap().is_none());
    api.write_status(StatusWrite {
        claim: claim("a"),
        driver: "gpu.example.com".into(),
        pool: "node-1".into(),
        statuses: Vec::new(),
    })
    .await
    .unwrap();
    assert_eq!(memory.writes.lock().unwrap()[0].claim, claim("a"));
}

#[tokio::test]
async fn no_answer_names_the_call_and_the_wait() {
    let api: Arc<dyn ApiPort> = Arc::new(Memory::default());
    let error = api.read_claim(&claim("a")).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "reading ResourceClaim default/a: no answer within 10s"
    );
}
