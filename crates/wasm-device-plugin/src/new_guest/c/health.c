
/* `health`: a device is healthy while every one of its candidates is present. */
bool exports_wasm_device_plugin_policy_health_check(
    exports_wasm_device_plugin_policy_health_list_device_facts_t *devices,
    exports_wasm_device_plugin_policy_health_list_verdict_t *ret, string_t *err) {
    (void)err;
    ret->len = devices->len;
    ret->ptr = alloc_array(devices->len, sizeof *ret->ptr);
    for (size_t i = 0; i < devices->len; i++) {
        exports_wasm_device_plugin_policy_health_device_facts_t *facts = &devices->ptr[i];
        const string_t *missing = NULL;
        for (size_t j = 0; j < facts->device.candidates.len && !missing; j++) {
            const string_t *id = &facts->device.candidates.ptr[j];
            bool present = false;
            for (size_t k = 0; k < facts->candidates.len; k++)
                if (facts->candidates.ptr[k].present && same(&facts->candidates.ptr[k].id, id)) present = true;
            if (!present) missing = id;
        }
        exports_wasm_device_plugin_policy_health_verdict_t *verdict = &ret->ptr[i];
        verdict->id = facts->device.id; /* the input's, handed back once */
        verdict->healthy = missing == NULL;
        if (missing) {
            verdict->reason = concat("not present: ", missing, "");
            log_string(WASM_DEVICE_PLUGIN_POLICY_HOST_LOG_LEVEL_WARN, &verdict->reason);
        } else {
            guest_string_dup(&verdict->reason, "every candidate is present");
        }
    }
    return true;
}
