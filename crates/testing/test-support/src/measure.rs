//! The figures benches print: percentiles of timings, and a process's
//! memory and CPU time read from `/proc` (Linux).

use std::time::Duration;

/// The `p` quantile (0..=1) of `samples`, which it sorts: the nearest
/// sample by rank, no interpolation.
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Microseconds, for printing.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`, `RssAnon`, ...);
/// 0 when the process or the field is gone.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The resident set size (`VmRSS`) of process `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// CPU time (user + system) process `pid` has used so far.
pub fn cpu_time(pid: u32) -> Duration {
    stat_cpu_time(&format!("/proc/{pid}/stat"))
}

/// CPU time (user + system) the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    stat_cpu_time("/proc/thread-self/stat")
}

/// The user and system times of a `stat` file.
fn stat_cpu_time(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // USER_HZ is 100 on every Linux the project targets.
    Duration::from_millis(ticks * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_takes_the_nearest_sample_by_rank() {
        let mut samples: Vec<Duration> = [5, 1, 4, 2, 3].map(Duration::from_millis).to_vec();
        assert_eq!(percentile(&mut samples, 0.0), Duration::from_millis(1));
        assert_eq!(percentile(&mut samples, 0.5), Duration::from_millis(3));
        assert_eq!(percentile(&mut samples, 0.99), Duration::from_millis(5));
    }

    #[test]
    fn this_process_has_a_resident_set_and_the_dead_none() {
        assert!(rss_kib(std::process::id()) > 0);
        assert_eq!(status_kib(u32::MAX, "VmRSS"), 0);
    }
}
