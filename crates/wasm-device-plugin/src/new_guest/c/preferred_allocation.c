
/* `preferred-allocation`: the must-include devices first, then the first
 * available ones, up to the requested size. */
bool exports_wasm_device_plugin_policy_preferred_allocation_choose(
    exports_wasm_device_plugin_policy_preferred_allocation_request_t *request,
    guest_list_string_t *ret, string_t *err) {
    size_t size = request->size;
    if (request->must_include.len > size) {
        guest_string_dup(err, "the must-include devices do not fit the allocation");
        return false;
    }
    ret->len = 0;
    ret->ptr = alloc_array(size, sizeof *ret->ptr);
    for (size_t i = 0; i < request->must_include.len; i++)
        ret->ptr[ret->len++] = dup_string(&request->must_include.ptr[i]);
    for (size_t i = 0; i < request->available.len && ret->len < size; i++) {
        const string_t *id = &request->available.ptr[i].id;
        bool taken = false;
        for (size_t j = 0; j < ret->len && !taken; j++) taken = same(&ret->ptr[j], id);
        if (!taken) ret->ptr[ret->len++] = dup_string(id);
    }
    if (ret->len < size) {
        guest_list_string_free(ret);
        guest_string_dup(err, "not enough devices available for the allocation");
        return false;
    }
    return true;
}
