/* See json.h. The scanner is deliberately iterative: a hostile body nested a million levels deep
 * cannot overflow the (small, fixed) WebAssembly stack; it just fails with JSON_MAX_DEPTH. */
#include "json.h"

size_t json_ws(const uint8_t *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* *i at the opening quote; moves past the closing one. */
static bool skip_string(const uint8_t *s, size_t n, size_t *i) {
    size_t p = *i;
    if (p >= n || s[p] != '"') return false;
    p++;
    while (p < n) {
        uint8_t c = s[p];
        if (c == '"') {
            *i = p + 1;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            if (p + 1 >= n) return false;
            uint8_t e = s[p + 1];
            if (e == 'u') {
                if (p + 5 >= n) return false;
                for (int k = 2; k <= 5; k++)
                    if (hexval(s[p + k]) < 0) return false;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return false;
            }
        } else {
            p++;
        }
    }
    return false;
}

static bool skip_scalar(const uint8_t *s, size_t n, size_t *i) {
    size_t p = *i;
    static const char *const literals[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        const char *lit = literals[k];
        size_t m = 0;
        while (lit[m] && p + m < n && s[p + m] == (uint8_t)lit[m]) m++;
        if (!lit[m]) {
            *i = p + m;
            return true;
        }
    }
    /* A number: -?digits(.digits)?([eE][+-]?digits)? */
    if (p < n && s[p] == '-') p++;
    size_t digits = p;
    while (p < n && s[p] >= '0' && s[p] <= '9') p++;
    if (p == digits) return false;
    if (p < n && s[p] == '.') {
        p++;
        size_t frac = p;
        while (p < n && s[p] >= '0' && s[p] <= '9') p++;
        if (p == frac) return false;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < n && (s[p] == '+' || s[p] == '-')) p++;
        size_t exp = p;
        while (p < n && s[p] >= '0' && s[p] <= '9') p++;
        if (p == exp) return false;
    }
    *i = p;
    return true;
}

bool json_skip_value(const uint8_t *s, size_t n, size_t *i) {
    /* stack[d] is the closing bracket expected at depth d; expect_value tracks the grammar
     * inside containers: after '[' or ',' a value, after '{' or ',' a key then ':' then a value. */
    uint8_t stack[JSON_MAX_DEPTH];
    size_t depth = 0;
    size_t p = json_ws(s, n, *i);
    for (;;) {
        /* Here a value is expected at p. */
        if (p >= n) return false;
        uint8_t c = s[p];
        if (c == '{' || c == '[') {
            if (depth == JSON_MAX_DEPTH) return false;
            stack[depth++] = c == '{' ? '}' : ']';
            p = json_ws(s, n, p + 1);
            if (p < n && s[p] == stack[depth - 1]) {
                depth--; /* an empty container is a whole value: go on as after a value */
                p++;
            } else if (c == '{') {
                if (!skip_string(s, n, &p)) return false;
                p = json_ws(s, n, p);
                if (p >= n || s[p] != ':') return false;
                p = json_ws(s, n, p + 1);
                continue;
            } else {
                continue;
            }
        } else if (c == '"') {
            if (!skip_string(s, n, &p)) return false;
        } else {
            if (!skip_scalar(s, n, &p)) return false;
        }
        /* After a value: close containers or move to the next element. */
        for (;;) {
            if (depth == 0) {
                *i = p;
                return true;
            }
            p = json_ws(s, n, p);
            if (p >= n) return false;
            if (s[p] == stack[depth - 1]) {
                depth--;
                p++;
                continue;
            }
            if (s[p] != ',') return false;
            p = json_ws(s, n, p + 1);
            if (stack[depth - 1] == '}') {
                if (!skip_string(s, n, &p)) return false;
                p = json_ws(s, n, p);
                if (p >= n || s[p] != ':') return false;
                p = json_ws(s, n, p + 1);
            }
            break;
        }
    }
}

static bool open_container(const uint8_t *s, size_t n, size_t at, uint8_t open, json_iter *it) {
    size_t p = json_ws(s, n, at);
    if (p >= n || s[p] != open) return false;
    it->pos = p + 1;
    it->first = true;
    return true;
}

bool json_object_open(const uint8_t *s, size_t n, size_t at, json_iter *it) {
    return open_container(s, n, at, '{', it);
}

bool json_array_open(const uint8_t *s, size_t n, size_t at, json_iter *it) {
    return open_container(s, n, at, '[', it);
}

static int next_element(const uint8_t *s, size_t n, json_iter *it, uint8_t close, json_span *key,
                        json_span *value) {
    size_t p = json_ws(s, n, it->pos);
    if (p >= n) return -1;
    if (s[p] == close) {
        it->pos = p + 1;
        return 0;
    }
    if (!it->first) {
        if (s[p] != ',') return -1;
        p = json_ws(s, n, p + 1);
    }
    if (key) {
        key->start = p;
        if (!skip_string(s, n, &p)) return -1;
        key->end = p;
        p = json_ws(s, n, p);
        if (p >= n || s[p] != ':') return -1;
        p = json_ws(s, n, p + 1);
    }
    value->start = p;
    if (!json_skip_value(s, n, &p)) return -1;
    value->end = p;
    it->pos = p;
    it->first = false;
    return 1;
}

int json_object_next(const uint8_t *s, size_t n, json_iter *it, json_span *key, json_span *value) {
    return next_element(s, n, it, '}', key, value);
}

int json_array_next(const uint8_t *s, size_t n, json_iter *it, json_span *value) {
    return next_element(s, n, it, ']', 0, value);
}

size_t utf8_sequence(const uint8_t *s, size_t n, size_t p) {
    uint8_t b = s[p];
    if (b < 0x80) return 1;
    size_t len;
    uint32_t min;
    if (b >= 0xC2 && b <= 0xDF) len = 2, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (p + len > n) return 0;
    uint32_t cp = b & (0x3F >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[p + k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[p + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

bool utf8_valid(const uint8_t *data, size_t len) {
    size_t i = 0;
    while (i < len) {
        size_t seq = utf8_sequence(data, len, i);
        if (!seq) return false;
        i += seq;
    }
    return true;
}

/* Decodes one character of a JSON string body at *p (not at the closing quote) into a code
 * point; lone surrogates become U+FFFD. Assumes the string was validated by skip_string. */
static uint32_t decode_char(const uint8_t *s, size_t end, size_t *p) {
    size_t q = *p;
    if (s[q] != '\\') {
        /* One raw UTF-8 byte at a time is enough for comparison and copying. */
        *p = q + 1;
        return 0x80000000u | s[q];
    }
    uint8_t e = s[q + 1];
    *p = q + 2;
    switch (e) {
        case 'b': return '\b';
        case 'f': return '\f';
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'u': break;
        default: return e; /* " \ / */
    }
    uint32_t cp = 0;
    for (int k = 2; k <= 5; k++) cp = cp << 4 | (uint32_t)hexval(s[q + k]);
    *p = q + 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        /* A high surrogate: take the low one if it follows. */
        size_t r = q + 6;
        if (r + 5 < end && s[r] == '\\' && s[r + 1] == 'u') {
            uint32_t lo = 0;
            bool ok = true;
            for (int k = 2; k <= 5; k++) {
                int h = hexval(s[r + k]);
                if (h < 0) ok = false;
                lo = lo << 4 | (uint32_t)(h < 0 ? 0 : h);
            }
            if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
                *p = r + 6;
                return 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
        }
        return 0xFFFD;
    }
    if (cp >= 0xDC00 && cp <= 0xDFFF) return 0xFFFD;
    return cp;
}

bool json_string_equals(const uint8_t *s, json_span str, const char *want) {
    if (str.end < str.start + 2 || s[str.start] != '"') return false;
    size_t p = str.start + 1, end = str.end - 1;
    size_t k = 0;
    while (p < end) {
        uint32_t c = decode_char(s, end, &p);
        if (c & 0x80000000u) c &= 0xFF; /* raw byte */
        else if (c >= 0x80) return false; /* escaped non-ASCII never matches an ASCII name */
        if (!want[k] || (uint8_t)want[k] != c) return false;
        k++;
    }
    return want[k] == 0;
}

bool json_object_get(const uint8_t *s, json_span obj, const char *key, json_span *value) {
    json_iter it;
    if (!json_object_open(s, obj.end, obj.start, &it)) return false;
    json_span k, v;
    while (json_object_next(s, obj.end, &it, &k, &v) == 1) {
        if (json_string_equals(s, k, key)) {
            *value = v;
            return true;
        }
    }
    return false;
}

bool json_is_string(const uint8_t *s, json_span value) {
    return value.end >= value.start + 2 && s[value.start] == '"';
}

static bool is_literal(const uint8_t *s, json_span value, const char *lit) {
    size_t k = 0;
    while (lit[k]) {
        if (value.start + k >= value.end || s[value.start + k] != (uint8_t)lit[k]) return false;
        k++;
    }
    return value.start + k == value.end;
}

bool json_is_null(const uint8_t *s, json_span value) { return is_literal(s, value, "null"); }
bool json_is_true(const uint8_t *s, json_span value) { return is_literal(s, value, "true"); }

size_t json_decode_string(const uint8_t *s, json_span str, uint8_t *out, size_t cap, bool *truncated) {
    *truncated = false;
    if (!json_is_string(s, str)) return 0;
    size_t p = str.start + 1, end = str.end - 1, w = 0;
    while (p < end) {
        size_t at = p;
        uint32_t c = decode_char(s, end, &p);
        uint8_t enc[4];
        size_t m;
        if (c & 0x80000000u) {
            /* Raw bytes: copy a whole UTF-8 sequence at once so a cut never splits one. */
            size_t len = utf8_sequence(s, end, at);
            if (len == 0) {
                c = 0xFFFD; /* not UTF-8: replaced, one byte at a time */
            } else {
                if (w + len > cap) {
                    *truncated = true;
                    return w;
                }
                for (size_t k = 0; k < len; k++) out[w + k] = s[at + k];
                w += len;
                p = at + len;
                continue;
            }
        }
        if (c < 0x80) {
            enc[0] = (uint8_t)c;
            m = 1;
        } else if (c < 0x800) {
            enc[0] = (uint8_t)(0xC0 | c >> 6);
            enc[1] = (uint8_t)(0x80 | (c & 0x3F));
            m = 2;
        } else if (c < 0x10000) {
            enc[0] = (uint8_t)(0xE0 | c >> 12);
            enc[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
            enc[2] = (uint8_t)(0x80 | (c & 0x3F));
            m = 3;
        } else {
            enc[0] = (uint8_t)(0xF0 | c >> 18);
            enc[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
            enc[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
            enc[3] = (uint8_t)(0x80 | (c & 0x3F));
            m = 4;
        }
        if (w + m > cap) {
            *truncated = true;
            return w;
        }
        for (size_t k = 0; k < m; k++) out[w + k] = enc[k];
        w += m;
    }
    return w;
}
