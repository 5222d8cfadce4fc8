/* {{name}}: a Switchyard adapter in C, started by `switchyard adapter new {{name}} --lang c`.
 *
 * As written it is an OpenAI-compatible pass-through: the request goes to
 * {base_url}/chat/completions with the upstream model and the key, answers and stream chunks come
 * back unchanged, errors are classified by status. Change it to speak your upstream's protocol.
 *
 * The bindings (gen/adapter_world.h) are generated from wit/adapter.wit by build.sh.
 * Memory rules (see README.md):
 *  - every argument an export gets is yours: keep it or free it with the generated *_free helper
 *    (never plain free(): an empty string or list may carry a dummy pointer);
 *  - every string/list you return must be malloc'd: the bindings free it after the host copied
 *    it; an empty one must have ptr NULL;
 *  - the session rep is malloc'd in the constructor and freed in the destructor. */
#include <stdlib.h>
#include <string.h>

#include "adapter_world.h"
#include "json.h"

#define ADAPTER_NAME "{{name}}"
#define ADAPTER_VERSION "0.1.0"

typedef adapter_world_string_t string_t;
typedef switchyard_adapter_types_adapter_error_t adapter_error_t;
typedef switchyard_adapter_types_stream_output_t stream_output_t;
typedef switchyard_adapter_types_error_kind_t error_kind_t;

/* One request's state. */
struct exports_switchyard_adapter_adapter_session_t {
    switchyard_adapter_types_source_context_t ctx; /* owned: freed by the destructor */
    bool finished;                                 /* a chunk carried a finish_reason */
    bool done;                                     /* data: [DONE] arrived */
};
typedef exports_switchyard_adapter_adapter_session_t session_t;

/* ---- helpers -------------------------------------------------------------------------- */

/* A growable byte buffer; its ptr can be handed to the bindings as a result. */
typedef struct {
    uint8_t *ptr;
    size_t len, cap;
} buf_t;

static void buf_put(buf_t *b, const void *data, size_t len) {
    if (len == 0) return;
    if (len > SIZE_MAX / 2 - b->len) __builtin_trap();
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + len) cap *= 2;
        uint8_t *p = realloc(b->ptr, cap);
        if (!p) __builtin_trap(); /* out of memory: the host discards the instance */
        b->ptr = p;
        b->cap = cap;
    }
    memcpy(b->ptr + b->len, data, len);
    b->len += len;
}

static void buf_puts(buf_t *b, const char *text) { buf_put(b, text, strlen(text)); }

/* Appends at most max bytes of untrusted text as valid UTF-8 (bad bytes become U+FFFD). */
static void buf_put_utf8(buf_t *b, const uint8_t *data, size_t len, size_t max) {
    size_t i = 0;
    while (i < len && b->len < max) {
        size_t seq = utf8_sequence(data, len, i);
        if (seq) buf_put(b, data + i, seq);
        else buf_puts(b, "\xEF\xBF\xBD");
        i += seq ? seq : 1;
    }
}

/* Moves a buffer into a result string; an empty one becomes {NULL, 0}. */
static string_t str_take(buf_t *b) {
    string_t s = {b->len ? b->ptr : NULL, b->len};
    if (!b->len) free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
    return s;
}

static string_t str_copy(const void *data, size_t len) {
    string_t s = {0};
    if (len) adapter_world_string_dup_n(&s, (const char *)data, len);
    return s;
}

static string_t str_lit(const char *text) { return str_copy(text, strlen(text)); }

static bool str_eq(const string_t *s, const char *text, bool nocase) {
    size_t n = strlen(text);
    if (s->len != n) return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t a = s->ptr[i], c = (uint8_t)text[i];
        if (nocase && a >= 'A' && a <= 'Z') a = (uint8_t)(a - 'A' + 'a');
        if (a != c) return false;
    }
    return true;
}

/* A source setting (`settings:` in the config), or NULL. */
static const string_t *setting(const session_t *self, const char *key) {
    for (size_t i = 0; i < self->ctx.settings.len; i++)
        if (str_eq(&self->ctx.settings.ptr[i].f0, key, false)) return &self->ctx.settings.ptr[i].f1;
    return NULL;
}

static void set_error(adapter_error_t *err, error_kind_t kind, buf_t *message) {
    memset(err, 0, sizeof *err);
    err->kind = kind;
    err->message = str_take(message);
}

static void set_error_text(adapter_error_t *err, error_kind_t kind, const char *text) {
    buf_t b = {0};
    buf_puts(&b, text);
    set_error(err, kind, &b);
}

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* ---- describe, constructor, destructor ------------------------------------------------ */

void exports_switchyard_adapter_adapter_describe(exports_switchyard_adapter_adapter_metadata_t *ret) {
    ret->name = str_lit(ADAPTER_NAME); /* must match the file name: {{name}}.wasm */
    ret->version = str_lit(ADAPTER_VERSION);
    ret->protocol = str_lit("openai-chat");
    ret->stream_framing = SWITCHYARD_ADAPTER_TYPES_STREAM_FRAMING_SSE;
}

exports_switchyard_adapter_adapter_own_session_t exports_switchyard_adapter_adapter_constructor_session(
    exports_switchyard_adapter_adapter_source_context_t *context) {
    session_t *self = calloc(1, sizeof *self);
    if (!self) __builtin_trap();
    self->ctx = *context; /* keeps the context's strings and list: ours now */
    return exports_switchyard_adapter_adapter_session_new(self);
}

void exports_switchyard_adapter_adapter_session_destructor(session_t *self) {
    switchyard_adapter_types_source_context_free(&self->ctx);
    free(self);
}

/* ---- transform-request ---------------------------------------------------------------- */

/* The unified request with the top-level "model" set to the upstream model, gateway-only fields
 * dropped, other members copied as they are and, on a stream, usage asked for (the gateway's
 * books need it). False if the request is not one JSON object. */
static bool upstream_body(const session_t *self, const string_t *request, buf_t *out, bool *streaming) {
    const uint8_t *s = request->ptr;
    size_t n = request->len;
    json_iter it;
    json_span key, value;
    bool has_stream_options = false;
    *streaming = false;
    if (!json_object_open(s, n, 0, &it)) return false;
    buf_puts(out, "{\"model\":\"");
    const string_t *model = &self->ctx.upstream_model;
    for (size_t i = 0; i < model->len; i++) { /* as a JSON string */
        uint8_t c = model->ptr[i];
        if (c < 0x20) {
            char esc[7] = {'\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15], 0};
            buf_puts(out, esc);
            continue;
        }
        if (c == '"' || c == '\\') buf_put(out, "\\", 1);
        buf_put(out, &c, 1);
    }
    buf_puts(out, "\"");
    int r;
    while ((r = json_object_next(s, n, &it, &key, &value)) == 1) {
        /* Ours instead of the client's; then gateway-only fields an OpenAI upstream rejects. */
        if (json_string_equals(s, key, "model") || json_string_equals(s, key, "disable_thinking") ||
            json_string_equals(s, key, "thinking") || json_string_equals(s, key, "top_k"))
            continue;
        if (json_string_equals(s, key, "stream")) *streaming = json_is_true(s, value);
        if (json_string_equals(s, key, "stream_options")) has_stream_options = true;
        buf_puts(out, ",");
        buf_put(out, s + key.start, value.end - key.start); /* "key": value, as sent */
    }
    if (r < 0 || json_ws(s, n, it.pos) != n) return false;
    if (*streaming && !has_stream_options) buf_puts(out, ",\"stream_options\":{\"include_usage\":true}");
    buf_puts(out, "}");
    return true;
}

typedef struct {
    adapter_world_tuple2_string_string_t *ptr;
    size_t len, cap;
} headers_t;

static void header(headers_t *h, const char *name, string_t value) {
    if (h->len == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 4;
        h->ptr = realloc(h->ptr, h->cap * sizeof *h->ptr);
        if (!h->ptr) __builtin_trap();
    }
    h->ptr[h->len].f0 = str_lit(name);
    h->ptr[h->len].f1 = value;
    h->len++;
}

bool exports_switchyard_adapter_adapter_method_session_transform_request(
    session_t *self, string_t *request, exports_switchyard_adapter_adapter_http_request_t *ret,
    adapter_error_t *err) {
    bool ok = false, streaming;
    buf_t body = {0};
    if (self->ctx.operation != SWITCHYARD_ADAPTER_TYPES_OPERATION_CHAT) {
        set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_UNSUPPORTED, ADAPTER_NAME " does chat only");
        goto out;
    }
    if (!upstream_body(self, request, &body, &streaming)) {
        set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_BAD_REQUEST, "the request is not one JSON object");
        goto out;
    }
    headers_t headers = {0};
    header(&headers, "content-type", str_lit("application/json"));
    if (self->ctx.api_key.len) {
        buf_t auth = {0};
        buf_puts(&auth, "Bearer ");
        buf_put(&auth, self->ctx.api_key.ptr, self->ctx.api_key.len);
        header(&headers, "authorization", str_take(&auth));
    }
    if (streaming) header(&headers, "accept", str_lit("text/event-stream"));

    buf_t url = {0};
    buf_put(&url, self->ctx.base_url.ptr, self->ctx.base_url.len);
    const string_t *path = setting(self, "path");
    if (path && path->len) buf_put(&url, path->ptr, path->len);
    else buf_puts(&url, "/chat/completions");

    ret->method = str_lit("POST");
    ret->url = str_take(&url);
    ret->headers.ptr = headers.ptr;
    ret->headers.len = headers.len;
    ret->body.ptr = body.ptr; /* moved: the bindings free it after the host copied it */
    ret->body.len = body.len;
    body.ptr = NULL;
    ok = true;
out:
    free(body.ptr);
    adapter_world_string_free(request); /* the argument is ours to free */
    return ok;
}

/* ---- transform-response --------------------------------------------------------------- */

static error_kind_t kind_for_status(uint16_t status) {
    switch (status) {
        case 400: case 409: case 413: case 422: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_BAD_REQUEST;
        case 401: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_AUTH;
        case 402: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_QUOTA;
        case 403: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_PERMISSION;
        case 404: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_NOT_FOUND;
        case 429: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_RATE_LIMIT;
        case 503: case 529: return SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_OVERLOADED;
    }
    return (status >= 300 && status < 400) || status >= 500 ? SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_SERVER
                                                          : SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_BAD_REQUEST;
}

/* error.message and error.code of an OpenAI error body ({"error":{"message","code"}}). */
static void error_body(const uint8_t *s, size_t n, json_span *message, json_span *code) {
    json_span whole = {0, n}, error, v;
    size_t end = 0;
    message->start = message->end = code->start = code->end = 0;
    if (!json_skip_value(s, n, &end) || json_ws(s, n, end) != n) return; /* not JSON */
    if (!json_object_get(s, whole, "error", &error)) return;
    if (json_is_string(s, error)) *message = error;
    if (json_object_get(s, error, "message", &v) && json_is_string(s, v)) *message = v;
    if (json_object_get(s, error, "code", &v) && json_is_string(s, v)) *code = v;
}

static string_t decoded(const uint8_t *s, json_span str, size_t max) {
    buf_t b = {0};
    uint8_t tmp[512];
    bool truncated;
    size_t n = json_decode_string(s, str, tmp, max < sizeof tmp ? max : sizeof tmp, &truncated);
    buf_put(&b, tmp, n);
    return str_take(&b);
}

bool exports_switchyard_adapter_adapter_method_session_transform_response(
    session_t *self, exports_switchyard_adapter_adapter_http_response_t *response, string_t *ret,
    adapter_error_t *err) {
    const uint8_t *body = response->body.ptr;
    size_t n = response->body.len, start = 0;
    bool ok = false;
    if (response->status < 200 || response->status > 299) {
        json_span message, code;
        error_body(body, n, &message, &code);
        buf_t text = {0};
        set_error(err, kind_for_status(response->status), &text);
        if (message.end) {
            err->message = decoded(body, message, 512);
        } else {
            buf_puts(&text, "upstream answered HTTP ");
            char status[8];
            int k = 0;
            for (uint16_t v = response->status; v; v /= 10) status[k++] = (char)('0' + v % 10);
            while (k) buf_put(&text, &status[--k], 1);
            buf_puts(&text, ": ");
            buf_put_utf8(&text, body, n, 512);
            err->message = str_take(&text);
        }
        if (code.end) {
            err->code.is_some = true;
            err->code.val = decoded(body, code, 64);
            if (response->status == 429 && json_string_equals(body, code, "insufficient_quota"))
                err->kind = SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_QUOTA; /* spent, not just too fast */
        }
        err->status.is_some = true;
        err->status.val = response->status;
        for (size_t i = 0; i < response->headers.len; i++) { /* Retry-After: seconds */
            const string_t *name = &response->headers.ptr[i].f0, *value = &response->headers.ptr[i].f1;
            if (!str_eq(name, "retry-after", true) || value->len == 0 || value->len > 9) continue;
            uint64_t secs = 0;
            size_t d = 0;
            while (d < value->len && value->ptr[d] >= '0' && value->ptr[d] <= '9') secs = secs * 10 + (value->ptr[d++] - '0');
            if (d == value->len) {
                err->retry_after_ms.is_some = true;
                err->retry_after_ms.val = secs * 1000;
            }
        }
        goto out;
    }
    while (start < n && is_ws(body[start])) start++;
    if (start == n || body[start] != '{' || !utf8_valid(body, n)) {
        set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_INVALID_RESPONSE, "upstream answered something other than a JSON object");
        goto out;
    }
    /* The body is ours: it becomes the result as it is (a string must be valid UTF-8). */
    ret->ptr = response->body.ptr;
    ret->len = n;
    response->body.ptr = NULL;
    response->body.len = 0;
    ok = true;
out:
    switchyard_adapter_types_http_response_free(response);
    return ok;
}

/* ---- streams -------------------------------------------------------------------------- */

bool exports_switchyard_adapter_adapter_method_session_transform_stream_chunk(
    session_t *self, exports_switchyard_adapter_adapter_stream_event_t *event, stream_output_t *ret,
    adapter_error_t *err) {
    const uint8_t *s = event->data.ptr;
    size_t a = 0, z = event->data.len;
    bool ok = true;
    while (a < z && is_ws(s[a])) a++;
    while (z > a && is_ws(s[z - 1])) z--;
    ret->chunks.ptr = NULL;
    ret->chunks.len = 0;
    if (z - a == 6 && memcmp(s + a, "[DONE]", 6) == 0) self->done = true;
    ret->done = self->done;
    if (self->done || z == a) goto out; /* [DONE], keep-alives, anything after [DONE] */

    json_iter it;
    json_span key, value, choice, reason;
    int r = json_object_open(s, z, a, &it) ? 1 : -1;
    while (r == 1 && (r = json_object_next(s, z, &it, &key, &value)) == 1) {
        if (json_string_equals(s, key, "error")) {
            json_span message, code;
            error_body(s + a, z - a, &message, &code);
            set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_SERVER, "upstream sent an error event");
            if (message.end) {
                adapter_world_string_free(&err->message);
                err->message = decoded(s + a, message, 512);
            }
            ok = false;
            goto out;
        }
        json_iter choices;
        if (json_string_equals(s, key, "choices") && json_array_open(s, value.end, value.start, &choices))
            while (json_array_next(s, value.end, &choices, &choice) == 1)
                if (json_object_get(s, choice, "finish_reason", &reason) && !json_is_null(s, reason))
                    self->finished = true;
    }
    if (r < 0 || json_ws(s, z, it.pos) != z) {
        set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_INVALID_RESPONSE, "stream event is not a JSON object");
        ok = false;
        goto out;
    }
    /* Pass the chunk through: the event's data is ours, so it becomes the chunk. */
    ret->chunks.ptr = malloc(sizeof(string_t));
    if (!ret->chunks.ptr) __builtin_trap();
    ret->chunks.ptr[0] = event->data;
    ret->chunks.len = 1;
    event->data.ptr = NULL;
    event->data.len = 0;
out:
    switchyard_adapter_types_stream_event_free(event);
    return ok;
}

bool exports_switchyard_adapter_adapter_method_session_finish_stream(session_t *self, stream_output_t *ret,
                                                                     adapter_error_t *err) {
    if (self->done || self->finished) { /* [DONE], or a finish_reason and then the end */
        ret->chunks.ptr = NULL;
        ret->chunks.len = 0;
        ret->done = true;
        return true;
    }
    set_error_text(err, SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_TRUNCATED, "upstream stream ended before [DONE] or a finish_reason");
    return false;
}
