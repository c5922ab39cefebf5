use super::*;

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn the_first_pass_is_at_once_and_the_next_waits_the_interval() {
    let now = Instant::now();
    let mut pacing = Pacing::new(SECOND);
    assert!(pacing.allows(now));
    pacing.started(now);
    pacing.succeeded();
    assert!(!pacing.allows(now + Duration::from_millis(999)));
    assert_eq!(pacing.earliest(), Some(now + SECOND));
    assert!(pacing.allows(now + SECOND));
    pacing.set_interval(5 * SECOND);
    assert_eq!(pacing.earliest(), Some(now + 5 * SECOND));
}

#[test]
fn failures_back_off_doubling_with_up_to_half_again_of_jitter() {
    let now = Instant::now();
    let mut pacing = Pacing::new(Duration::ZERO);
    let mut base = FIRST_RETRY_DELAY;
    for _ in 0..12 {
        pacing.started(now);
        let wait = pacing.failed(now, None);
        assert!(
            wait >= base && wait <= base.mul_f64(1.5),
            "{wait:?} for {base:?}"
        );
        assert_eq!(pacing.earliest(), Some(now + wait));
        base = (base * 2).min(MAX_RETRY_DELAY);
    }
    assert_eq!(base, MAX_RETRY_DELAY);
    pacing.succeeded();
    pacing.started(now);
    let wait = pacing.failed(now, None);
    assert!(
        wait < FIRST_RETRY_DELAY * 2,
        "the backoff started over: {wait:?}"
    );
}

#[test]
fn retry_after_is_a_floor_capped_at_ten_minutes() {
    let now = Instant::now();
    let mut pacing = Pacing::new(Duration::ZERO);
    pacing.started(now);
    let wait = pacing.failed(now, Some(7 * SECOND));
    assert!(
        wait >= 7 * SECOND && wait <= (7 * SECOND).mul_f64(1.5),
        "{wait:?}"
    );
    assert!(!pacing.allows(now + 7 * SECOND - Duration::from_millis(1)));
    pacing.started(now);
    let wait = pacing.failed(now, Some(Duration::from_secs(86_400)));
    assert!(wait >= MAX_RETRY_AFTER && wait <= MAX_RETRY_AFTER.mul_f64(1.5));
}

#[test]
fn jitter_spreads_retries() {
    let waits: std::collections::BTreeSet<Duration> = (0..50)
        .map(|_| with_jitter(SECOND, random_fraction()))
        .collect();
    assert!(waits.len() > 40, "{} distinct waits of 50", waits.len());
    assert_eq!(with_jitter(SECOND, 0.0), SECOND);
    assert_eq!(with_jitter(SECOND, 1.0), SECOND.mul_f64(1.5));
}
