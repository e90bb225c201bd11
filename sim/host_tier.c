/*
 * host_tier.c - the host tier's links and its option (host_tier.h).
 *
 * Link figures, one direction, in GB/s (10^9 bytes per second):
 *  - PCIe Gen4 x16: 16 GT/s per lane, 128b/130b encoding, 1.97 GB/s per lane,
 *    31.5 GB/s per direction raw (PCI-SIG's PCIe 4.0 base specification, as
 *    tabulated e.g. by Wikipedia's "PCI Express" article); host<->device
 *    copies from pinned memory reach about 80 % of that once packet headers
 *    and flow control are paid: 25 GB/s is the figure used ("pcie4").
 *  - PCIe Gen5 x16: 32 GT/s, 63.0 GB/s per direction raw (same table);
 *    50 GB/s effective by the same 80 % ("pcie5").
 *  - NVLink-C2C (Grace Hopper GH200): 900 GB/s total between Grace and
 *    Hopper (NVIDIA, "NVIDIA Grace Hopper Superchip Architecture In-Depth",
 *    developer blog, 2022), i.e. 450 GB/s each way ("c2c").
 * A measured figure is better than any of these: pass "N GB/s" (e.g.
 * `--host-tier 23.4GB/s`, as CUDA's bandwidthTest prints it).
 */
#include "host_tier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"

static const struct {
    const char *name;
    double gbps;
} links[] = {
    {"pcie4", 25.0}, /* PCIe Gen4 x16, effective (31.5 raw) */
    {"pcie5", 50.0}, /* PCIe Gen5 x16, effective (63.0 raw) */
    {"c2c", 450.0},  /* NVLink-C2C, 900 GB/s total, per direction */
};

#define USAGE_FIX                                                                                  \
    "give pcie4, pcie5, c2c or a bandwidth like 25GB/s, then optionally ,size=64GiB and "          \
    ",touch=free|none (e.g. --host-tier pcie4,size=64GiB)"

static int parse_link(const char *s, gm_host_tier *h, gm_err *err)
{
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (!strcmp(s, links[i].name)) {
            h->bytes_per_s = links[i].gbps * 1e9;
            snprintf(h->name, sizeof h->name, "%s", s);
            return GM_OK;
        }
    size_t n = strlen(s);
    if (n > 4 && !strcmp(s + n - 4, "GB/s")) {
        char num[32];
        if (n - 4 < sizeof num) {
            memcpy(num, s, n - 4);
            num[n - 4] = 0;
            char *end;
            double v = strtod(num, &end);
            if (end != num && !*end && isfinite(v) && v > 0 && v <= 1e6) {
                h->bytes_per_s = v * 1e9;
                snprintf(h->name, sizeof h->name, "%s", s);
                return GM_OK;
            }
        }
    }
    return gm_errf(err, GM_EUSAGE, "--host-tier: '%s' is not a link or a bandwidth; " USAGE_FIX, s);
}

int gm_host_tier_parse(const char *arg, gm_host_tier *out, gm_err *err)
{
    gm_host_tier h = {.touch = GM_TOUCH_FREE};
    char buf[160];
    if (!arg || !*arg || strlen(arg) >= sizeof buf)
        return gm_errf(err, GM_EUSAGE, "--host-tier: '%s' is empty or too long; " USAGE_FIX,
                       arg ? arg : "");
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL, *part = strtok_r(buf, ",", &save);
    if (!part || parse_link(part, &h, err))
        return part ? err->code : gm_errf(err, GM_EUSAGE, "--host-tier: '%s': " USAGE_FIX, arg);
    while ((part = strtok_r(NULL, ",", &save))) {
        if (!strncmp(part, "size=", 5)) {
            gm_err e2;
            if (gm_parse_size(part + 5, "size", &h.size, &e2) || h.size == 0)
                return gm_errf(err, GM_EUSAGE,
                               "--host-tier: size '%s' is not a size of more than 0 bytes "
                               "(e.g. size=64GiB)",
                               part + 5);
        } else if (!strcmp(part, "touch=free")) {
            h.touch = GM_TOUCH_FREE;
        } else if (!strcmp(part, "touch=none")) {
            h.touch = GM_TOUCH_NONE;
        } else {
            return gm_errf(err, GM_EUSAGE, "--host-tier: unknown part '%s'; " USAGE_FIX, part);
        }
    }
    *out = h;
    return GM_OK;
}

uint64_t gm_host_tier_ns(const gm_host_tier *h, uint64_t bytes)
{
    return (uint64_t)llround((double)bytes * 1e9 / h->bytes_per_s);
}

const char *gm_touch_name(int touch)
{
    return touch == GM_TOUCH_NONE ? "none" : "free";
}
