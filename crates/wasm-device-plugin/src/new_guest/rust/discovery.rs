
use exports::wasm_device_plugin::policy::discovery;

/// `discovery`: one device per present candidate, named after it.
impl discovery::Guest for Policy {
    fn discover(candidates: Vec<discovery::Candidate>) -> Result<Vec<discovery::Device>, String> {
        Ok(candidates
            .into_iter()
            .filter(|candidate| candidate.present)
            .map(|candidate| discovery::Device {
                id: candidate.id.clone(),
                candidates: vec![candidate.id],
                numa_nodes: candidate.numa_nodes,
                attributes: Vec::new(),
                replicas: 0,
            })
            .collect())
    }
}
