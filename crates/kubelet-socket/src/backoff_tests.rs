use std::time::Duration;

use super::Backoff;

#[test]
fn waits_double_up_to_five_seconds_and_start_again_after_a_reset() {
    let mut backoff = Backoff::new();
    let waits: Vec<Duration> = (0..10).map(|_| backoff.step()).collect();
    assert_eq!(waits[0], Duration::from_millis(25));
    assert_eq!(waits[1], Duration::from_millis(50));
    assert_eq!(waits[4], Duration::from_millis(400));
    assert_eq!(waits[8], Duration::from_secs(5));
    assert_eq!(waits[9], Duration::from_secs(5));
    backoff.reset();
    assert_eq!(backoff.step(), Duration::from_millis(25));
}
