/*
 * `c-sriov`: SR-IOV virtual functions as DRA partitions, in C.
 *
 * Each advertised device is an SR-IOV physical function (PF). `dra-layout`
 * gives PF number n (its position) the counter set `pf-<n>` with `vfs` (the
 * PF's `sriov_totalvfs`, else guest-config `vfs`, else 8) and `queue-pairs`
 * (guest-config, default 64); the whole PF takes all of both, and each
 * partition `pf-<n>-vf-<i>` takes one VF and its share of the queue pairs.
 * `dra-prepare` creates a claimed VF through a granted attribute and
 * reports it Ready with its interface name; `dra-unprepare` removes it.
 *
 *     writable-attributes = ["sriov_vf_enable", "sriov_vf_disable"]
 *     [guest-config]
 *     queue-pairs = "64"
 *     create-attribute = "sriov_vf_enable"
 *     remove-attribute = "sriov_vf_disable"
 *
 * The same guest exists in Python (`python/sriov/app.py`) and JavaScript
 * (`js/sriov.js`).
 *
 * Memory: every string handed back is a malloc'd copy of its own (the
 * post-return glue frees each one), and each hook frees its input, so the
 * instance's memory stays flat if the host keeps it warm.
 *
 * Bindings: `wit-bindgen c guests/polyglot/wit -w sriov-guest` (a world of
 * its own: dra-layout, dra-prepare, dra-unprepare); see
 * `guests/polyglot/build.sh`.
 */
#include "sriov_guest.h"
#include "wdp_util.h"

typedef sriov_guest_string_t string_t;
typedef sriov_guest_tuple2_string_string_t pair_t;
typedef wasm_device_plugin_policy_types_device_t device_t;
typedef wasm_device_plugin_policy_types_claim_device_t claim_device_t;
typedef wasm_device_plugin_policy_types_device_status_t status_t;
typedef wasm_device_plugin_policy_types_device_condition_t condition_t;
typedef exports_wasm_device_plugin_policy_dra_layout_counter_t counter_t;
typedef exports_wasm_device_plugin_policy_dra_layout_list_counter_t counters_t;
typedef exports_wasm_device_plugin_policy_dra_layout_list_counter_consumption_t consumption_t;
typedef exports_wasm_device_plugin_policy_dra_layout_list_capacity_t capacities_t;
typedef exports_wasm_device_plugin_policy_dra_layout_partition_t partition_t;

static wdp_str S(const string_t *s) { return wdp_s(s->ptr, s->len); }
static wdp_str C(const char *s) { return wdp_s((const uint8_t *)s, strlen(s)); }

/* Owned strings for the answer: a buffer's bytes, a copy, a number. */
static string_t take(wdp_buf *b) {
    string_t s = {b->ptr, b->len};
    return s;
}
static string_t copy(wdp_str s) {
    wdp_buf b = {0};
    wdp_buf_put(&b, s);
    return take(&b);
}
static string_t number(uint64_t n) {
    wdp_buf b = {0};
    wdp_buf_putu(&b, n);
    return take(&b);
}

static void log_info(wdp_buf *b) {
    string_t s = take(b);
    wasm_device_plugin_policy_host_log(WASM_DEVICE_PLUGIN_POLICY_HOST_LOG_LEVEL_INFO, &s);
    free(s.ptr);
}

/* The [guest-config] table, fetched at the start of each hook. */
static sriov_guest_list_tuple2_string_string_t config;

static wdp_str setting(const char *name, const char *fallback) {
    for (size_t i = 0; i < config.len; i++)
        if (wdp_eq_c(S(&config.ptr[i].f0), name)) return S(&config.ptr[i].f1);
    return C(fallback);
}

/* An array for the answer: NULL when empty (the glue frees only non-empty
 * lists). */
static void *array(size_t n, size_t size) { return n ? wdp_xmalloc(n * size) : NULL; }

static bool blank(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* `text` as a whole number (1 to 9 digits); else false and the error. */
static bool whole_number(wdp_str what, wdp_str text, uint32_t *out, string_t *err) {
    while (text.len && blank(text.ptr[0])) text = wdp_s(text.ptr + 1, text.len - 1);
    while (text.len && blank(text.ptr[text.len - 1])) text.len--;
    bool ok = text.len >= 1 && text.len <= 9;
    uint32_t n = 0;
    for (size_t i = 0; ok && i < text.len; i++) {
        ok = text.ptr[i] >= '0' && text.ptr[i] <= '9';
        n = n * 10 + (uint32_t)(text.ptr[i] - '0');
    }
    if (ok) {
        *out = n;
        return true;
    }
    wdp_buf b = {0};
    wdp_buf_put(&b, what);
    wdp_buf_puts(&b, ": expected a whole number, got \"");
    wdp_buf_put(&b, text);
    wdp_buf_puts(&b, "\"");
    *err = take(&b);
    return false;
}

/* The PF's `sriov_totalvfs`, else guest-config `vfs`, else 8. */
static bool total_vfs(string_t *pf, uint32_t *vfs, string_t *err) {
    string_t name, text, problem;
    sriov_guest_string_set(&name, "sriov_totalvfs");
    if (!wasm_device_plugin_policy_hardware_read_attribute(pf, &name, &text, &problem)) {
        free(problem.ptr);
        return whole_number(C("guest-config key `vfs`"), setting("vfs", "8"), vfs, err);
    }
    wdp_buf what = {0};
    wdp_buf_put(&what, S(pf));
    wdp_buf_puts(&what, ": sriov_totalvfs");
    bool ok = whole_number(wdp_s(what.ptr, what.len), S(&text), vfs, err);
    free(what.ptr);
    free(text.ptr);
    return ok;
}

static counters_t amounts(uint32_t vfs, uint32_t queue_pairs) {
    counters_t list = {wdp_xmalloc(2 * sizeof(counter_t)), 2};
    list.ptr[0] = (counter_t){copy(C("vfs")), number(vfs)};
    list.ptr[1] = (counter_t){copy(C("queue-pairs")), number(queue_pairs)};
    return list;
}

static string_t set_name(size_t n) {
    wdp_buf b = {0};
    wdp_buf_puts(&b, "pf-");
    wdp_buf_putu(&b, n);
    return take(&b);
}

/* Takes `vfs` and `queue_pairs` of counter set `pf-<n>`. */
static consumption_t consumes(size_t n, uint32_t vfs, uint32_t queue_pairs) {
    consumption_t list = {wdp_xmalloc(sizeof *list.ptr), 1};
    list.ptr[0].counter_set = set_name(n);
    list.ptr[0].counters = amounts(vfs, queue_pairs);
    return list;
}

bool exports_wasm_device_plugin_policy_dra_layout_describe(
    exports_wasm_device_plugin_policy_dra_layout_list_device_t *devices,
    exports_wasm_device_plugin_policy_dra_layout_layout_t *ret, string_t *err) {
    wasm_device_plugin_policy_host_config(&config);
    uint32_t queue_pairs, *vfs = wdp_xmalloc(devices->len * sizeof *vfs);
    size_t partitions = 0;
    bool ok = whole_number(C("guest-config key `queue-pairs`"), setting("queue-pairs", "64"), &queue_pairs, err);
    for (size_t n = 0; ok && n < devices->len; n++) {
        device_t *d = &devices->ptr[n];
        ok = total_vfs(d->candidates.len ? &d->candidates.ptr[0] : &d->id, &vfs[n], err);
        if (ok) partitions += vfs[n];
    }
    if (ok) {
        ret->counter_sets.len = ret->devices.len = devices->len;
        ret->counter_sets.ptr = array(devices->len, sizeof *ret->counter_sets.ptr);
        ret->devices.ptr = array(devices->len, sizeof *ret->devices.ptr);
        ret->partitions.len = partitions;
        ret->partitions.ptr = array(partitions, sizeof *ret->partitions.ptr);
        partition_t *part = ret->partitions.ptr;
        for (size_t n = 0; n < devices->len; n++) {
            device_t *d = &devices->ptr[n];
            wdp_str pf = S(d->candidates.len ? &d->candidates.ptr[0] : &d->id);
            ret->counter_sets.ptr[n].name = set_name(n);
            ret->counter_sets.ptr[n].counters = amounts(vfs[n], queue_pairs);
            /* The whole PF takes every VF and queue pair: it excludes its VFs. */
            ret->devices.ptr[n].id = copy(S(&d->id));
            ret->devices.ptr[n].consumes_counters = consumes(n, vfs[n], queue_pairs);
            ret->devices.ptr[n].capacity = (capacities_t){NULL, 0}; /* even empty, an aligned pointer */
            ret->devices.ptr[n].allow_multiple_allocations = false;
            for (uint32_t i = 0; i < vfs[n]; i++, part++) {
                wdp_buf id = {0};
                wdp_buf_puts(&id, "pf-");
                wdp_buf_putu(&id, n);
                wdp_buf_puts(&id, "-vf-");
                wdp_buf_putu(&id, i);
                part->id = take(&id);
                part->parent = copy(S(&d->id));
                part->attributes.len = 2;
                part->attributes.ptr = wdp_xmalloc(2 * sizeof(pair_t));
                part->attributes.ptr[0] = (pair_t){copy(C("vf-index")), number(i)};
                part->attributes.ptr[1] = (pair_t){copy(C("pf-address")), copy(pf)};
                part->consumes_counters = consumes(n, 1, queue_pairs / vfs[n]);
                part->capacity = (capacities_t){NULL, 0};
            }
        }
    }
    free(vfs);
    exports_wasm_device_plugin_policy_dra_layout_list_device_free(devices);
    sriov_guest_list_tuple2_string_string_free(&config);
    return ok;
}

/* The VF number of a partition this guest made (`pf-<n>-vf-<i>`). */
static bool vf_index(const claim_device_t *d, uint32_t *i) {
    wdp_str id = S(&d->id);
    size_t start = id.len;
    while (start > 0 && id.ptr[start - 1] >= '0' && id.ptr[start - 1] <= '9') start--;
    if (!d->partition || start == id.len || id.len - start > 9 || start < 4 ||
        memcmp(id.ptr + start - 4, "-vf-", 4) != 0)
        return false;
    *i = 0;
    for (size_t k = start; k < id.len; k++) *i = *i * 10 + (uint32_t)(id.ptr[k] - '0');
    return true;
}

/* The PF's candidate, from a fresh list the caller frees. */
static const wasm_device_plugin_policy_types_candidate_t *
find_pf(wasm_device_plugin_policy_hardware_list_candidate_t *all, const string_t *pf) {
    wasm_device_plugin_policy_hardware_candidates(all);
    for (size_t k = 0; k < all->len; k++)
        if (wdp_eq(S(&all->ptr[k].id), S(pf))) return &all->ptr[k];
    return NULL;
}

/* `<the PF's first network interface (pci.net)>v<i>`, or "". */
static string_t interface_name(const string_t *pf, uint32_t i) {
    wasm_device_plugin_policy_hardware_list_candidate_t all;
    const wasm_device_plugin_policy_types_candidate_t *c = find_pf(&all, pf);
    wdp_buf b = {0};
    for (size_t k = 0; c && k < c->attributes.len; k++) {
        if (!wdp_eq_c(S(&c->attributes.ptr[k].f0), "pci.net")) continue;
        wdp_str net = S(&c->attributes.ptr[k].f1);
        size_t first = 0;
        while (first < net.len && net.ptr[first] != ',') first++;
        if (first) {
            wdp_buf_put(&b, wdp_s(net.ptr, first));
            wdp_buf_puts(&b, "v");
            wdp_buf_putu(&b, i);
        }
        break;
    }
    wasm_device_plugin_policy_hardware_list_candidate_free(&all);
    return take(&b);
}

static bool pf_present(const string_t *pf) {
    wasm_device_plugin_policy_hardware_list_candidate_t all;
    const wasm_device_plugin_policy_types_candidate_t *c = find_pf(&all, pf);
    bool present = c && c->present;
    wasm_device_plugin_policy_hardware_list_candidate_free(&all);
    return present;
}

/* Writes `value` to attribute `name` of the PF and logs `<id>: <done> VF
 * <i> of <pf>`; on failure, the error `<id>: cannot <do> VF <i> of <pf>:
 * <why>`. */
static bool write_vf(claim_device_t *d, wdp_str name, string_t value, uint32_t i, const char *done,
                     const char *do_, string_t *err) {
    string_t attribute = {(uint8_t *)name.ptr, name.len}, problem;
    bool ok = wasm_device_plugin_policy_hardware_write_attribute(&d->device_id, &attribute, &value, &problem);
    wdp_buf b = {0};
    wdp_buf_put(&b, S(&d->id));
    wdp_buf_puts(&b, ": ");
    if (!ok) wdp_buf_puts(&b, "cannot ");
    wdp_buf_puts(&b, ok ? done : do_);
    wdp_buf_puts(&b, " VF ");
    wdp_buf_putu(&b, i);
    wdp_buf_puts(&b, " of ");
    wdp_buf_put(&b, S(&d->device_id));
    if (ok) {
        log_info(&b);
    } else {
        wdp_buf_puts(&b, ": ");
        wdp_buf_put(&b, S(&problem));
        free(problem.ptr);
        *err = take(&b);
    }
    free(value.ptr);
    return ok;
}

bool exports_wasm_device_plugin_policy_dra_prepare_prepare(
    exports_wasm_device_plugin_policy_dra_prepare_list_claim_device_t *devices,
    exports_wasm_device_plugin_policy_dra_prepare_list_device_status_t *ret, string_t *err) {
    wasm_device_plugin_policy_host_config(&config);
    wdp_str create = setting("create-attribute", "sriov_vf_enable");
    ret->len = 0;
    ret->ptr = array(devices->len, sizeof *ret->ptr);
    bool ok = true;
    for (size_t k = 0; ok && k < devices->len; k++) {
        claim_device_t *d = &devices->ptr[k]; /* device_id: with built-in discovery, the PF's address */
        uint32_t i;
        if (!vf_index(d, &i)) continue; /* the whole PF: nothing to create */
        /* A stand-in: on a real NIC a vendor tool (or `sriov_numvfs` and the
         * VF's own attributes) creates and configures the VF. */
        ok = write_vf(d, create, number(i), i, "created", "create", err);
        if (!ok) break;
        wdp_buf message = {0};
        wdp_buf_puts(&message, "VF ");
        wdp_buf_putu(&message, i);
        wdp_buf_puts(&message, " of ");
        wdp_buf_put(&message, S(&d->device_id));
        wdp_buf_puts(&message, " is ready");
        status_t *s = &ret->ptr[ret->len++];
        memset(s, 0, sizeof *s);
        s->id = copy(S(&d->id));
        s->conditions.len = 1;
        s->conditions.ptr = wdp_xmalloc(sizeof(condition_t));
        s->conditions.ptr[0] = (condition_t){copy(C("Ready")), copy(C("True")), copy(C("VfReady")), take(&message)};
        s->network.is_some = true;
        s->network.val.interface_name = interface_name(&d->device_id, i);
    }
    if (ret->len == 0) free(ret->ptr); /* the glue frees only non-empty lists */
    else if (!ok) exports_wasm_device_plugin_policy_dra_prepare_list_device_status_free(ret);
    exports_wasm_device_plugin_policy_dra_prepare_list_claim_device_free(devices);
    sriov_guest_list_tuple2_string_string_free(&config);
    return ok;
}

bool exports_wasm_device_plugin_policy_dra_unprepare_unprepare(
    exports_wasm_device_plugin_policy_dra_unprepare_list_claim_device_t *devices, string_t *err) {
    wasm_device_plugin_policy_host_config(&config);
    wdp_str remove = setting("remove-attribute", "sriov_vf_disable");
    bool ok = true;
    for (size_t k = 0; ok && k < devices->len; k++) {
        claim_device_t *d = &devices->ptr[k];
        uint32_t i;
        /* Remove only what exists: a PF that is gone took its VFs with it,
         * and the attribute ignores a VF that was never created. */
        if (!vf_index(d, &i) || !pf_present(&d->device_id)) continue;
        wdp_buf value = {0};
        wdp_buf_puts(&value, "-");
        wdp_buf_putu(&value, i);
        ok = write_vf(d, remove, take(&value), i, "removed", "remove", err);
    }
    exports_wasm_device_plugin_policy_dra_unprepare_list_claim_device_free(devices);
    sriov_guest_list_tuple2_string_string_free(&config);
    return ok;
}
