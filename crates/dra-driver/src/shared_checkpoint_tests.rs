use super::*;
use crate::checkpoint::PreparedClaim;

fn claim(name: &str) -> PreparedClaim {
    PreparedClaim {
        namespace: "ns".to_owned(),
        name: name.to_owned(),
        devices: Vec::new(),
        cdi_spec: None,
        status_written: false,
        device_metadata: None,
        passthrough: Vec::new(),
        unknown: Default::default(),
    }
}

fn shared(state: &std::path::Path) -> Arc<SharedCheckpoint> {
    Arc::new(SharedCheckpoint::new(
        "gpu.example.com",
        Checkpoint::load(state, "gpu.example.com"),
    ))
}

/// 16 claims recorded at once by tasks of their own.
async fn record_16(shared: &Arc<SharedCheckpoint>) -> Vec<Result<(), String>> {
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let uid = format!("uid-{n}");
                shared
                    .record(Change::Insert(uid, claim(&format!("claim-{n}"))))
                    .await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_recorded_together_are_all_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    for outcome in record_16(&shared).await {
        outcome.unwrap();
    }
    let reread = Checkpoint::load(dir.path(), "gpu.example.com");
    assert_eq!(reread.claims().len(), 16);
    assert_eq!(reread.get("uid-7").unwrap().name, "claim-7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_of_a_failed_write_gets_the_error_and_none_stays_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared(dir.path());
    shared
        .record(Change::Insert("old".to_owned(), claim("old")))
        .await
        .unwrap();
    // A folder where the file goes: every rename over it fails.
    let path = shared.read().await.path().to_owned();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("in-the-way")).unwrap();
    for outcome in record_16(&shared).await {
        let error = outcome.unwrap_err();
        assert!(
            error.contains(&path.display().to_string()),
            "the error names the checkpoint: {error}"
        );
    }
    let checkpoint = shared.read().await;
    assert_eq!(checkpoint.claims().len(), 1, "{:?}", checkpoint.claims());
    assert!(checkpoint.get("old").is_some());
}
