use super::*;

#[test]
fn a_plain_text_answer_becomes_a_status_with_the_header_value() {
    let status = status_with_retry_after(
        StatusCode::TOO_MANY_REQUESTS,
        b"Too many requests, please try again later.\n",
        5,
    );
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["code"], 429);
    assert_eq!(
        status["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 5);
}

#[test]
fn the_servers_status_is_kept_and_the_longer_wait_wins() {
    let body = br#"{"kind":"Status","code":504,"reason":"Timeout","message":"m","details":{"name":"x","retryAfterSeconds":9}}"#;
    let status = status_with_retry_after(StatusCode::GATEWAY_TIMEOUT, body, 2);
    assert_eq!(status["details"]["retryAfterSeconds"], 9);
    assert_eq!(status["details"]["name"], "x");
    assert_eq!(status["message"], "m");
    let status = status_with_retry_after(StatusCode::GATEWAY_TIMEOUT, body, 20);
    assert_eq!(status["details"]["retryAfterSeconds"], 20);
}
