
/* `discovery`: one device per present candidate, named after it. */
bool exports_wasm_device_plugin_policy_discovery_discover(
    exports_wasm_device_plugin_policy_discovery_list_candidate_t *candidates,
    exports_wasm_device_plugin_policy_discovery_list_device_t *ret, string_t *err) {
    (void)err;
    ret->len = 0;
    ret->ptr = alloc_array(candidates->len, sizeof *ret->ptr);
    for (size_t i = 0; i < candidates->len; i++) {
        exports_wasm_device_plugin_policy_discovery_candidate_t *candidate = &candidates->ptr[i];
        if (!candidate->present) continue;
        exports_wasm_device_plugin_policy_discovery_device_t *device = &ret->ptr[ret->len++];
        device->id = dup_string(&candidate->id);
        device->candidates.len = 1;
        device->candidates.ptr = alloc_array(1, sizeof *device->candidates.ptr);
        device->candidates.ptr[0] = candidate->id;  /* the input's, handed back once */
        device->numa_nodes = candidate->numa_nodes; /* likewise */
        /* attributes: none; replicas: 0 (= 1). alloc_array zeroed them. */
    }
    return true;
}
