//! A Warning Event on this node's Node object: what `kubectl describe
//! node` and `kubectl get events` show an operator (the host posts one
//! when it starts on its last good configuration). A core/v1 Event in the
//! `default` namespace, as the kubelet writes node events (the node's
//! name as the involved object's UID); RBAC `create` on events.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

/// The component events are reported by.
pub(crate) const EVENT_COMPONENT: &str = "wasm-device-plugin";

/// Posts a Warning Event with `reason` and `message` on Node `node`.
pub(crate) async fn post_node_event(
    client: &Client,
    node: &str,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let now = Time(Timestamp::now());
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{node}.")),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            uid: Some(node.to_owned()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some("Warning".to_owned()),
        count: Some(1),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        source: Some(EventSource {
            component: Some(EVENT_COMPONENT.to_owned()),
            host: Some(node.to_owned()),
        }),
        reporting_component: Some(EVENT_COMPONENT.to_owned()),
        reporting_instance: Some(node.to_owned()),
        ..Event::default()
    };
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &event).await.map(|_| ())
}
