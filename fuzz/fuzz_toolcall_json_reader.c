/* fuzz_toolcall_json_reader.c — libFuzzer target for the tolerant JSON
 * reader and value typing (tc_json.c, tc_schema.c): any bytes, read whole and
 * byte by byte, must give the same verdict and the same text, and whatever it
 * accepts must be valid JSON. Built by make fuzz. */
#include <stdint.h>
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

static int read_in(const char *in, size_t n, unsigned flags, size_t step, cv_buf *out)
{
    tc_json j;
    tc_json_init(&j, flags, (tc_type){ 0 }, NULL, out, NULL);
    size_t pos = 0, avail = step ? 0 : n;
    int rc = TC_MORE;
    for (;;) {
        if (step)
            avail = avail + step < n ? avail + step : n;
        size_t used = 0;
        rc = tc_json_feed(&j, in + pos, avail - pos, avail == n, &used);
        pos += used;
        if (rc != TC_MORE || avail == n)
            break;
    }
    tc_json_fini(&j);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned flags = data[0] & (TJ_GEMMA | TJ_NO_BARE);
    size_t step = 1 + data[1] % 7;
    const char *p = (const char *)data + 2;
    size_t n = size - 2;
    cv_buf a = { 0 }, b = { 0 };
    int ra = read_in(p, n, flags, 0, &a), rb = read_in(p, n, flags, step, &b);
    if (ra != rb || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len)))
        __builtin_trap();
    if (ra == TC_DONE && !memmem(a.data, a.len, "\\u0000", 6)) { /* jansson refuses \u0000 in keys */
        json_t *v = json_loadb(a.data, a.len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
        if (!v)
            __builtin_trap();
        json_decref(v);
    }
    cv_buf c = { 0 };
    tc_coerce_text(p, n, (tc_type){ (unsigned)data[0] & 0x7f }, data[0] & 0x80, &c);
    if (!memmem(c.data, c.len, "\\u0000", 6)) {
        json_t *v = json_loadb(c.data, c.len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
        if (!v)
            __builtin_trap();
        json_decref(v);
    }
    cv_buf_free(&a);
    cv_buf_free(&b);
    cv_buf_free(&c);
    return 0;
}
