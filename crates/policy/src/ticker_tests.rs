use super::*;

/// Waits (up to 10 s) until `condition` holds.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::yield_now();
    }
}

#[test]
fn ticks_only_while_a_call_runs() {
    let ticker = Ticker::start(Engine::default(), Duration::from_millis(1)).unwrap();
    eventually("the idle ticker parks", || ticker.parked());
    // Idle: no tick however long nothing runs.
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(ticker.ticks(), 0);
    assert!(ticker.parked());

    let busy = ticker.busy();
    eventually("a running call makes ticks", || ticker.ticks() >= 3);
    // A second call meanwhile keeps the ticking going.
    let second = ticker.busy();
    drop(busy);
    let seen = ticker.ticks();
    eventually("ticks go on while one call runs", || ticker.ticks() > seen);
    drop(second);
    eventually("the ticker parks once every call ended", || ticker.parked());
    let parked_at = ticker.ticks();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(ticker.ticks(), parked_at);
}

#[test]
fn ticks_never_come_faster_than_the_tick() {
    let tick = Duration::from_millis(20);
    let ticker = Ticker::start(Engine::default(), tick).unwrap();
    let started = Instant::now();
    let _busy = ticker.busy();
    // Calls beginning and ending meanwhile wake the thread early;
    // none of that may advance the epoch before its time.
    for _ in 0..50 {
        drop(ticker.busy());
    }
    eventually("three ticks", || ticker.ticks() >= 3);
    assert!(started.elapsed() >= tick * 3, "{:?}", started.elapsed());
}

#[test]
fn dropping_the_ticker_stops_its_thread_even_while_busy() {
    let ticker = Ticker::start(Engine::default(), Duration::from_millis(1)).unwrap();
    let demand = Arc::clone(&ticker.demand);
    std::mem::forget(ticker.busy());
    drop(ticker);
    // The join in drop returned: the thread saw the stop.
    assert!(demand.lock().stop);
}
