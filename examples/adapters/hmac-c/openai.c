/* See openai.h. */
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---- buffers -------------------------------------------------------------------------- */

static void buf_reserve(buf_t *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->len) __builtin_trap();
    size_t need = b->len + extra;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    uint8_t *p = (uint8_t *)realloc(b->ptr, cap);
    if (!p) __builtin_trap(); /* out of memory: the host discards the instance */
    b->ptr = p;
    b->cap = cap;
}

void buf_put(buf_t *b, const void *data, size_t len) {
    if (len == 0) return;
    buf_reserve(b, len);
    memcpy(b->ptr + b->len, data, len);
    b->len += len;
}

void buf_puts(buf_t *b, const char *text) { buf_put(b, text, strlen(text)); }

void buf_put_u64(buf_t *b, uint64_t v) {
    char digits[20];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_reserve(b, n);
    while (n) b->ptr[b->len++] = (uint8_t)digits[--n];
}

void buf_put_json_string(buf_t *b, const uint8_t *text, size_t len) {
    static const char hex[] = "0123456789abcdef";
    buf_put(b, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = text[i];
        if (c == '"' || c == '\\') {
            uint8_t esc[2] = {'\\', c};
            buf_put(b, esc, 2);
        } else if (c < 0x20) {
            uint8_t esc[6] = {'\\', 'u', '0', '0', (uint8_t)hex[c >> 4], (uint8_t)hex[c & 15]};
            buf_put(b, esc, 6);
        } else {
            buf_put(b, &c, 1);
        }
    }
    buf_put(b, "\"", 1);
}

void buf_put_utf8_prefix(buf_t *b, const uint8_t *data, size_t len, size_t max) {
    static const uint8_t replacement[3] = {0xEF, 0xBF, 0xBD};
    size_t written = 0, i = 0;
    while (i < len) {
        size_t seq = utf8_sequence(data, len, i);
        const uint8_t *piece = seq ? data + i : replacement;
        size_t piece_len = seq ? seq : 3;
        if (written + piece_len > max) {
            buf_puts(b, "\xE2\x80\xA6"); /* … */
            return;
        }
        buf_put(b, piece, piece_len);
        written += piece_len;
        i += seq ? seq : 1;
    }
}

void buf_free(buf_t *b) {
    free(b->ptr);
    b->ptr = 0;
    b->len = b->cap = 0;
}

/* ---- the upstream body ---------------------------------------------------------------- */

static const char *const GATEWAY_FIELDS[] = {"disable_thinking", "thinking", "top_k"};

bool openai_upstream_body(const uint8_t *req, size_t n, const uint8_t *model, size_t model_len,
                          bool stream_usage, buf_t *out, bool *streaming) {
    json_iter it;
    json_span key, value;
    if (!json_object_open(req, n, 0, &it)) return false;
    buf_t body = {0};
    bool model_done = false, has_stream_options = false, first = true;
    *streaming = false;
    int r;
    while ((r = json_object_next(req, n, &it, &key, &value)) == 1) {
        bool skip = false;
        for (size_t k = 0; k < sizeof GATEWAY_FIELDS / sizeof GATEWAY_FIELDS[0]; k++)
            if (json_string_equals(req, key, GATEWAY_FIELDS[k])) skip = true;
        if (json_string_equals(req, key, "model")) {
            if (!model_done) {
                buf_puts(&body, first ? "\"model\":" : ",\"model\":");
                buf_put_json_string(&body, model, model_len);
                model_done = true;
                first = false;
            }
            continue; /* a duplicate "model" would override ours in most parsers: dropped */
        }
        if (json_string_equals(req, key, "stream")) *streaming = json_is_true(req, value);
        if (json_string_equals(req, key, "stream_options")) {
            if (!stream_usage) skip = true;
            has_stream_options = true;
        }
        if (skip) continue;
        if (!first) buf_put(&body, ",", 1);
        buf_put(&body, req + key.start, key.end - key.start);
        buf_put(&body, ":", 1);
        buf_put(&body, req + value.start, value.end - value.start);
        first = false;
    }
    if (r < 0 || json_ws(req, n, it.pos) != n) {
        buf_free(&body);
        return false;
    }
    if (!model_done) {
        buf_puts(&body, first ? "\"model\":" : ",\"model\":");
        buf_put_json_string(&body, model, model_len);
    }
    if (*streaming && stream_usage && !has_stream_options)
        buf_puts(&body, ",\"stream_options\":{\"include_usage\":true}");
    buf_put(out, "{", 1);
    buf_put(out, body.ptr, body.len);
    buf_put(out, "}", 1);
    buf_free(&body);
    return true;
}

/* ---- stream chunks -------------------------------------------------------------------- */

chunk_class openai_classify_chunk(const uint8_t *data, size_t n) {
    json_iter it;
    json_span key, value;
    if (!json_object_open(data, n, 0, &it)) return CHUNK_INVALID;
    bool error = false, finished = false;
    int r;
    while ((r = json_object_next(data, n, &it, &key, &value)) == 1) {
        if (json_string_equals(data, key, "error")) error = true;
        if (!json_string_equals(data, key, "choices")) continue;
        json_iter choices;
        json_span choice, reason;
        if (!json_array_open(data, value.end, value.start, &choices)) continue;
        while (json_array_next(data, value.end, &choices, &choice) == 1) {
            if (json_object_get(data, choice, "finish_reason", &reason) && !json_is_null(data, reason))
                finished = true;
        }
    }
    if (r < 0 || json_ws(data, n, it.pos) != n) return CHUNK_INVALID;
    if (error) return CHUNK_ERROR;
    return finished ? CHUNK_FINISHED : CHUNK_PASS;
}

/* ---- errors --------------------------------------------------------------------------- */

/* Finds message and code in {"error":{"message","code","type"}}, {"error":"..."} or
 * {"message":...,"type":...}. Spans are left at {0,0} when absent. own_code is error.code only. */
static void error_fields(const uint8_t *body, size_t n, json_span *message, json_span *code, json_span *own_code) {
    json_span whole = {json_ws(body, n, 0), n}, error, v;
    message->start = message->end = code->start = code->end = own_code->start = own_code->end = 0;
    /* The whole body must be one object: a truncated body is read as text. */
    size_t end = whole.start;
    if (!json_skip_value(body, n, &end) || json_ws(body, n, end) != n) return;
    if (json_object_get(body, whole, "error", &error)) {
        if (json_is_string(body, error)) {
            *message = error;
            return;
        }
        if (json_object_get(body, error, "message", &v) && json_is_string(body, v)) *message = v;
        if (json_object_get(body, error, "code", &v) && json_is_string(body, v)) *code = *own_code = v;
        else if (json_object_get(body, error, "type", &v) && json_is_string(body, v)) *code = v;
        else if (json_object_get(body, error, "status", &v) && json_is_string(body, v)) *code = v;
        return;
    }
    if (json_object_get(body, whole, "message", &v) && json_is_string(body, v)) *message = v;
    if (json_object_get(body, whole, "type", &v) && json_is_string(body, v)) *code = v;
}

/* Decodes a JSON string span into a NUL-terminated, lowercased ASCII-ish copy for matching. */
static void lower_copy(const uint8_t *s, json_span str, char *out, size_t cap) {
    bool truncated;
    size_t n = str.end > str.start ? json_decode_string(s, str, (uint8_t *)out, cap - 1, &truncated) : 0;
    out[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] >= 'A' && out[i] <= 'Z') out[i] = (char)(out[i] - 'A' + 'a');
}

static void put_decoded(buf_t *b, const uint8_t *s, json_span str, size_t max) {
    uint8_t tmp[ERROR_MESSAGE_MAX];
    bool truncated;
    if (max > sizeof tmp) max = sizeof tmp;
    size_t n = json_decode_string(s, str, tmp, max, &truncated);
    buf_put(b, tmp, n);
    if (truncated) buf_puts(b, "\xE2\x80\xA6");
}

error_kind openai_classify(uint16_t status, const char *code, const char *message) {
    bool quota = strstr(code, "insufficient_quota") ||
                 (strstr(code, "resource_exhausted") && strstr(message, "quota")) ||
                 strstr(message, "exceeded your current quota") || strstr(code, "billing");
    if (strstr(code, "content_filter") || strstr(code, "content_policy") ||
        strstr(message, "content management policy"))
        return KIND_CONTENT_POLICY;
    switch (status) {
        case 401: return KIND_AUTH;
        case 402: return KIND_QUOTA;
        case 403: return KIND_PERMISSION;
        case 404: return KIND_NOT_FOUND;
        case 429: return quota ? KIND_QUOTA : KIND_RATE_LIMIT;
        case 400: case 409: case 413: case 422: return KIND_BAD_REQUEST;
        case 503: case 529: return KIND_OVERLOADED;
        default: break;
    }
    if (status >= 300 && status < 400) return KIND_SERVER; /* a redirect the host would not follow */
    if (status >= 500) return KIND_SERVER;
    return KIND_BAD_REQUEST;
}

void openai_upstream_error(uint16_t status, const uint8_t *body, size_t n, upstream_error *out) {
    json_span message, code, own_code;
    memset(out, 0, sizeof *out);
    error_fields(body, n, &message, &code, &own_code);
    if (message.end > message.start) {
        put_decoded(&out->message, body, message, ERROR_MESSAGE_MAX);
    } else {
        size_t a = 0, z = n;
        while (a < z && (body[a] == ' ' || body[a] == '\t' || body[a] == '\r' || body[a] == '\n')) a++;
        while (z > a && (body[z - 1] == ' ' || body[z - 1] == '\t' || body[z - 1] == '\r' || body[z - 1] == '\n')) z--;
        if (z > a) {
            buf_put_utf8_prefix(&out->message, body + a, z - a, ERROR_MESSAGE_MAX);
        } else {
            buf_puts(&out->message, "upstream returned HTTP ");
            buf_put_u64(&out->message, status);
        }
    }
    if (own_code.end > own_code.start) {
        out->has_code = true;
        put_decoded(&out->code, body, own_code, ERROR_CODE_MAX);
    }
    char code_l[128], message_l[ERROR_MESSAGE_MAX + 1];
    lower_copy(body, code, code_l, sizeof code_l);
    /* The message as sent (or the body prefix) decides the quota and content-policy cases. */
    size_t m = out->message.len < ERROR_MESSAGE_MAX ? out->message.len : ERROR_MESSAGE_MAX;
    for (size_t i = 0; i < m; i++) {
        char c = (char)out->message.ptr[i];
        message_l[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : (c ? c : ' ');
    }
    message_l[m] = 0;
    out->kind = openai_classify(status, code_l, message_l);
}

void openai_error_message(const uint8_t *body, size_t n, buf_t *out) {
    json_span message, code, own_code;
    error_fields(body, n, &message, &code, &own_code);
    if (message.end > message.start) put_decoded(out, body, message, ERROR_MESSAGE_MAX);
    else buf_puts(out, "upstream sent an error event");
}

bool parse_retry_after_ms(const uint8_t *v, size_t len, uint64_t *ms) {
    size_t i = 0;
    while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
    while (len > i && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    uint64_t secs = 0, frac_ms = 0;
    size_t digits = 0;
    while (i < len && v[i] >= '0' && v[i] <= '9') {
        if (++digits > 10) return false; /* over 300 years: nonsense */
        secs = secs * 10 + (v[i++] - '0');
    }
    if (i < len && v[i] == '.') {
        i++;
        size_t frac_digits = 0;
        uint64_t scale = 100;
        while (i < len && v[i] >= '0' && v[i] <= '9') {
            if (frac_digits++ < 3) {
                frac_ms += (uint64_t)(v[i] - '0') * scale;
                scale /= 10;
            }
            i++;
        }
        if (frac_digits == 0 && digits == 0) return false;
    } else if (digits == 0) {
        return false;
    }
    if (i != len) return false;
    *ms = secs * 1000 + frac_ms;
    return true;
}
