/*
 * `c-health`: the `presence-health` health guest, in C.
 *
 * Same behaviour as the Rust guest (`guests/presence-health`): a device is
 * unhealthy while any of its candidates is not present, and (for PCI
 * candidates) while no driver is bound or the bound driver is not in the
 * config list `drivers` (when given). Every verdict carries a reason.
 *
 *     [guest-config]
 *     drivers = "nvidia,vfio-pci"
 *
 * Bindings: `wit-bindgen c wit -w health-guest`; see
 * `guests/polyglot/build.sh`.
 */
#include "health_guest.h"
#include "wdp_util.h"

typedef health_guest_string_t string_t;
typedef wasm_device_plugin_policy_types_candidate_t candidate_t;
typedef exports_wasm_device_plugin_policy_health_device_facts_t facts_t;
typedef exports_wasm_device_plugin_policy_health_verdict_t verdict_t;

static wdp_str S(const string_t *s) { return wdp_s(s->ptr, s->len); }

typedef struct {
    wdp_str *items;
    size_t len;
} str_list;

/* The config value of `key` as a list, read like the Rust SDK's
 * `Config::list`: comma-separated, blanks trimmed, empty items dropped,
 * a TOML array rendered as a string (`["a", "b"]`) accepted too. */
static str_list config_list(const char *key) {
    health_guest_list_tuple2_string_string_t config;
    wasm_device_plugin_policy_host_config(&config);
    str_list out = {NULL, 0};
    const string_t *found = NULL;
    for (size_t i = 0; i < config.len && !found; i++)
        if (wdp_eq_c(S(&config.ptr[i].f0), key)) found = &config.ptr[i].f1;
    if (!found) return out;
    wdp_str value = wdp_trim(S(found));
    if (value.len >= 2 && value.ptr[0] == '[' && value.ptr[value.len - 1] == ']')
        value = wdp_s(value.ptr + 1, value.len - 2);
    out.items = wdp_xmalloc((value.len + 1) * sizeof *out.items);
    size_t start = 0;
    for (size_t i = 0; i <= value.len; i++) {
        if (i < value.len && value.ptr[i] != ',') continue;
        wdp_str item = wdp_trim(wdp_s(value.ptr + start, i - start));
        while (item.len && (item.ptr[0] == '"' || item.ptr[0] == '\'')) item = wdp_s(item.ptr + 1, item.len - 1);
        while (item.len && (item.ptr[item.len - 1] == '"' || item.ptr[item.len - 1] == '\'')) item.len--;
        if (item.len) out.items[out.len++] = item;
        start = i + 1;
    }
    return out;
}

/* First value of attribute `name`, or NULL. */
static const string_t *attr(const wasm_device_plugin_policy_types_attributes_t *attrs, const char *name) {
    for (size_t i = 0; i < attrs->len; i++)
        if (wdp_eq_c(S(&attrs->ptr[i].f0), name)) return &attrs->ptr[i].f1;
    return NULL;
}

static void put_candidate(wdp_buf *b, wdp_str id) {
    wdp_buf_puts(b, "candidate ");
    wdp_buf_put(b, id);
}

/* Appends why `c` makes its device unhealthy (after "; " when `b` is not
 * empty); returns whether it does. */
static bool problem(wdp_buf *b, const candidate_t *c, const str_list *drivers) {
    if (!c->present) {
        if (b->len) wdp_buf_puts(b, "; ");
        put_candidate(b, S(&c->id));
        wdp_buf_puts(b, " is not present");
        return true;
    }
    if (c->kind != WASM_DEVICE_PLUGIN_POLICY_TYPES_CANDIDATE_KIND_PCI) return false;
    const string_t *driver = attr(&c->attributes, "pci.driver");
    if (!driver || driver->len == 0) {
        if (b->len) wdp_buf_puts(b, "; ");
        put_candidate(b, S(&c->id));
        wdp_buf_puts(b, " has no driver bound");
        return true;
    }
    if (drivers->len == 0) return false;
    for (size_t i = 0; i < drivers->len; i++)
        if (wdp_eq(drivers->items[i], S(driver))) return false;
    if (b->len) wdp_buf_puts(b, "; ");
    put_candidate(b, S(&c->id));
    wdp_buf_puts(b, " is bound to driver ");
    wdp_buf_put(b, S(driver));
    wdp_buf_puts(b, ", expected one of ");
    for (size_t i = 0; i < drivers->len; i++) {
        if (i) wdp_buf_puts(b, ", ");
        wdp_buf_put(b, drivers->items[i]);
    }
    return true;
}

static void verdict(verdict_t *out, const facts_t *facts, const str_list *drivers) {
    const wasm_device_plugin_policy_types_device_t *device = &facts->device;
    wdp_buf reason = {0};
    bool unhealthy = false;
    for (size_t i = 0; i < device->candidates.len; i++) {
        wdp_str id = S(&device->candidates.ptr[i]);
        const candidate_t *found = NULL;
        for (size_t j = 0; j < facts->candidates.len && !found; j++)
            if (wdp_eq(S(&facts->candidates.ptr[j].id), id)) found = &facts->candidates.ptr[j];
        if (!found) {
            if (reason.len) wdp_buf_puts(&reason, "; ");
            put_candidate(&reason, id);
            wdp_buf_puts(&reason, " is gone");
            unhealthy = true;
        } else if (problem(&reason, found, drivers)) {
            unhealthy = true;
        }
    }
    if (!unhealthy) {
        wdp_buf_puts(&reason, "all ");
        wdp_buf_putu(&reason, device->candidates.len);
        wdp_buf_puts(&reason, " candidates present");
    }
    out->id = device->id; /* handed back; the post-return glue frees it */
    out->healthy = !unhealthy;
    out->reason.ptr = reason.ptr;
    out->reason.len = reason.len;
}

bool exports_wasm_device_plugin_policy_health_check(exports_wasm_device_plugin_policy_health_list_device_facts_t *devices,
                                                    exports_wasm_device_plugin_policy_health_list_verdict_t *ret,
                                                    string_t *err) {
    (void)err;
    str_list drivers = config_list("drivers");
    ret->len = devices->len;
    ret->ptr = wdp_xmalloc(devices->len * sizeof *ret->ptr);
    for (size_t i = 0; i < devices->len; i++) verdict(&ret->ptr[i], &devices->ptr[i], &drivers);
    return true;
}
