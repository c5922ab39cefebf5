
/* `pre-start`: refuses to start a container with a device that has no
 * device node; returning false fails the start with the message in *err. */
bool exports_wasm_device_plugin_policy_pre_start_pre_start(
    exports_wasm_device_plugin_policy_pre_start_list_device_ref_t *devices, string_t *err) {
    for (size_t i = 0; i < devices->len; i++) {
        if (devices->ptr[i].nodes.len == 0) {
            *err = concat("device ", &devices->ptr[i].id, " has no device node");
            return false;
        }
    }
    log_text(WASM_DEVICE_PLUGIN_POLICY_HOST_LOG_LEVEL_INFO, "pre-start: the devices are ready");
    return true;
}
