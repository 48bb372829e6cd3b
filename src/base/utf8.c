/* utf8.c — strict UTF-8 decoding and encoding (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), plus the boundary helper streaming
 * detokenizers use to hold back an incomplete trailing sequence. */
#include "base/base.h"

int cv_utf8_decode(const char *str, size_t len, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    *cp = 0xFFFD;
    if (len == 0)
        return -1;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int n;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; v = c & 0x07; min = 0x10000; }
    else return -1;
    if ((size_t)n > len)
        return -1;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return -1;
    *cp = v;
    return n;
}

int cv_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        o[0] = (unsigned char)(0xF0 | (cp >> 18));
        o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (unsigned char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

bool cv_utf8_valid(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int n = cv_utf8_decode(s + i, len - i, &cp);
        if (n < 0)
            return false;
        i += (size_t)n;
    }
    return true;
}

/* Expected length of a sequence from its lead byte, 0 if it cannot lead. */
static int lead_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t cv_utf8_complete_prefix(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    /* Look back at most 3 bytes for a lead byte whose sequence is cut off. */
    size_t i = len;
    for (int back = 0; back < 4 && i > 0; back++) {
        i--;
        if ((s[i] & 0xC0) != 0x80) {
            int n = lead_len(s[i]);
            if (n > 1 && (size_t)n > len - i) {
                /* Hold it only if what we have so far could still be valid. */
                uint32_t cp;
                char tmp[4] = { 0 };
                memcpy(tmp, s + i, len - i);
                for (size_t k = len - i; k < (size_t)n; k++)
                    tmp[k] = (char)0x80 | (k == 1 && s[i] == 0xE0 ? 0x20 : 0) | (k == 1 && s[i] == 0xF0 ? 0x10 : 0);
                if (cv_utf8_decode(tmp, (size_t)n, &cp) > 0)
                    return i;
            }
            return len;
        }
    }
    return len;
}

void cv_utf8_sanitize(cv_buf *b, const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) { cv_buf_putc(b, s[i]); i++; continue; }
        uint32_t cp;
        int n = cv_utf8_decode(s + i, len - i, &cp);
        if (n < 0) {
            cv_buf_append(b, "\xEF\xBF\xBD", 3);
            i++;
        } else {
            cv_buf_append(b, s + i, (size_t)n);
            i += (size_t)n;
        }
    }
}
