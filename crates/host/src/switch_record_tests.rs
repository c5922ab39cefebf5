//! Tests of `switch_record`: a record survives a restart, and a damaged
//! one is reported, not taken for "no handover".

use super::*;

fn record() -> SwitchRecord {
    SwitchRecord {
        resource: "example.com/gpu".to_owned(),
        driver: "gpu.example.com".to_owned(),
        socket: "example.com-gpu.sock".to_owned(),
    }
}

#[test]
fn a_written_record_reads_back_until_removed() {
    let state = tempfile::tempdir().unwrap();
    assert!(SwitchRecord::read(state.path(), "example.com/gpu").is_none());
    record().write(state.path()).unwrap();
    assert_eq!(
        SwitchRecord::read(state.path(), "example.com/gpu"),
        Some(Ok(record()))
    );
    SwitchRecord::remove(state.path(), "example.com/gpu");
    assert!(SwitchRecord::read(state.path(), "example.com/gpu").is_none());
}

#[test]
fn a_damaged_record_is_an_error_naming_the_file() {
    let state = tempfile::tempdir().unwrap();
    record().write(state.path()).unwrap();
    std::fs::write(path(state.path(), "example.com/gpu"), b"{\"resource\": 1").unwrap();
    let error = SwitchRecord::read(state.path(), "example.com/gpu")
        .unwrap()
        .unwrap_err();
    assert!(error.contains("api-switch/example.com_gpu.json"), "{error}");
}
