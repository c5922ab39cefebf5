//! An overloaded server: ResourceSlice writes answered with 429 or 5xx and `Retry-After`, in
//! both shapes the real server uses, and the write log that shows when a client came back.

use crate::common::{api_error, client_of, slice, start};
use kube::api::{Api, PostParams};
use wdp_fake_apiserver::{ResourceSlice, Throttle, ThrottleBody};

#[tokio::test]
async fn throttled_writes_get_the_code_and_retry_after_then_writes_pass_again() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(client_of(&h.server, &h.dir, false).await);
    h.server.throttle_writes(Throttle {
        code: 429,
        retry_after_seconds: 7,
        count: 1,
        body: ThrottleBody::Status,
    });

    // Reads are never throttled.
    api.list(&Default::default()).await.unwrap();
    let status = api_error(
        api.create(
            &PostParams::default(),
            &slice("a", "n", "d.example.com", &["x"]),
        )
        .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(status.details.map(|d| d.retry_after_seconds), Some(7));

    api.create(
        &PostParams::default(),
        &slice("a", "n", "d.example.com", &["x"]),
    )
    .await
    .expect("the throttle covered one write");
    let codes: Vec<u16> = h.server.write_attempts().iter().map(|a| a.code).collect();
    assert_eq!(codes, [429, 201]);
    let attempts = h.server.write_attempts();
    assert!(attempts[0].at <= attempts[1].at);
    assert!(attempts.iter().all(|a| a.method == "POST"));
}

#[tokio::test]
async fn a_plain_text_answer_carries_the_retry_after_only_in_its_header() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(client_of(&h.server, &h.dir, false).await);
    h.server.throttle_writes(Throttle {
        code: 503,
        retry_after_seconds: 3,
        count: 2,
        body: ThrottleBody::PlainText,
    });
    for _ in 0..2 {
        let status = api_error(
            api.create(
                &PostParams::default(),
                &slice("a", "n", "d.example.com", &["x"]),
            )
            .await,
        );
        // kube makes a Status of a body that is none: the header is all there is.
        assert_eq!(status.code, 503);
        assert!(status.message.contains("Too many requests"), "{status:?}");
        assert_eq!(status.details, None);
    }
    api.create(
        &PostParams::default(),
        &slice("a", "n", "d.example.com", &["x"]),
    )
    .await
    .expect("the throttle covered two writes");
}
