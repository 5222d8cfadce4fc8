/* hmac-openai: an OpenAI-compatible Chat Completions adapter that signs every request.
 *
 *   x-signature-timestamp: <unix seconds, from the host's now-unix-ms>
 *   x-signature:           sha256=<hex HMAC-SHA256(signing_secret, timestamp + "." + body)>
 *
 * The body is the unified request with "model" set to the source's upstream model (see
 * openai.c); responses and stream chunks pass through unchanged; error responses are classified
 * by status and body. Written against the bindings `wit-bindgen c` generates for
 * wit/adapter.wit (build.sh puts them in gen/).
 *
 * Memory ownership (the generated bindings' rules, see README.md):
 *  - every argument an export gets is ours: keep it (as the constructor keeps its context) or
 *    free it with the generated *_free helper (never plain free(): an empty string or list may
 *    carry a dummy pointer);
 *  - every string/list in a return value must be malloc'd (cabi_realloc, *_string_dup_n, our
 *    buf_t) and is freed by the generated cabi_post_* function after the host copied it; an empty
 *    one must have ptr NULL (post-return skips len 0, so a malloc'd empty buffer would leak);
 *  - the session rep is malloc'd in the constructor and freed in the destructor. */
#include <stdlib.h>
#include <string.h>

#include "adapter_world.h"
#include "json.h"
#include "openai.h"
#include "sha256.h"

#define ADAPTER_NAME "hmac-openai"
#define ADAPTER_VERSION "0.1.0"

typedef adapter_world_string_t string_t;
typedef switchyard_adapter_types_adapter_error_t adapter_error_t;
typedef switchyard_adapter_types_stream_output_t stream_output_t;

/* openai.h numbers its kinds as the WIT enum does. */
_Static_assert(KIND_BAD_REQUEST == SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_BAD_REQUEST, "error kinds");
_Static_assert(KIND_RATE_LIMIT == SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_RATE_LIMIT, "error kinds");
_Static_assert(KIND_SERVER == SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_SERVER, "error kinds");
_Static_assert(KIND_TRUNCATED == SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_TRUNCATED, "error kinds");
_Static_assert(KIND_UNSUPPORTED == SWITCHYARD_ADAPTER_TYPES_ERROR_KIND_UNSUPPORTED, "error kinds");

/* One request's state: the source context (owned: freed by the destructor) and what the
 * stream has signalled so far. */
struct exports_switchyard_adapter_adapter_session_t {
    switchyard_adapter_types_source_context_t ctx;
    bool finished; /* a chunk carried a finish_reason */
    bool done;     /* data: [DONE] arrived */
};

typedef exports_switchyard_adapter_adapter_session_t session_t;

/* ---- small helpers -------------------------------------------------------------------- */

/* A malloc'd copy, as return values need; empty -> {NULL, 0}. */
static string_t str_copy(const void *data, size_t len) {
    string_t s = {0};
    if (len > 0) adapter_world_string_dup_n(&s, (const char *)data, len);
    return s;
}

static string_t str_lit(const char *text) { return str_copy(text, strlen(text)); }

/* Moves a buffer into a return-value string (no copy); an empty buffer is freed. */
static string_t str_take(buf_t *b) {
    string_t s = {b->ptr, b->len};
    if (b->len == 0) {
        buf_free(b);
        s.ptr = NULL;
    }
    b->ptr = NULL;
    b->len = b->cap = 0;
    return s;
}

static bool str_eq(const string_t *s, const char *text) {
    size_t n = strlen(text);
    return s->len == n && memcmp(s->ptr, text, n) == 0;
}

static bool str_eq_nocase(const string_t *s, const char *text) {
    size_t n = strlen(text);
    if (s->len != n) return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t a = s->ptr[i], b = (uint8_t)text[i];
        if (a >= 'A' && a <= 'Z') a = (uint8_t)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z') b = (uint8_t)(b - 'A' + 'a');
        if (a != b) return false;
    }
    return true;
}

/* A source setting by key, or NULL. Borrowed from the session: do not free. */
static const string_t *setting(const session_t *self, const char *key) {
    const adapter_world_list_tuple2_string_string_t *settings = &self->ctx.settings;
    for (size_t i = 0; i < settings->len; i++)
        if (str_eq(&settings->ptr[i].f0, key)) return &settings->ptr[i].f1;
    return NULL;
}

static void set_error(adapter_error_t *err, error_kind kind, buf_t *message) {
    memset(err, 0, sizeof *err);
    err->kind = (switchyard_adapter_types_error_kind_t)kind;
    err->message = str_take(message);
}

static void set_error_text(adapter_error_t *err, error_kind kind, const char *message) {
    buf_t b = {0};
    buf_puts(&b, message);
    set_error(err, kind, &b);
}

/* A growable list of headers for the upstream request. */
typedef struct {
    adapter_world_tuple2_string_string_t *ptr;
    size_t len, cap;
} headers_t;

/* Appends a header; name and value must be malloc'd (or empty with ptr NULL): they move in. */
static void header_push(headers_t *h, string_t name, string_t value) {
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        void *p = realloc(h->ptr, cap * sizeof *h->ptr);
        if (!p) __builtin_trap();
        h->ptr = p;
        h->cap = cap;
    }
    h->ptr[h->len].f0 = name;
    h->ptr[h->len].f1 = value;
    h->len++;
}

static void header_add(headers_t *h, const char *name, string_t value) { header_push(h, str_lit(name), value); }

/* ---- describe / constructor / destructor ---------------------------------------------- */

void exports_switchyard_adapter_adapter_describe(exports_switchyard_adapter_adapter_metadata_t *ret) {
    ret->name = str_lit(ADAPTER_NAME);
    ret->version = str_lit(ADAPTER_VERSION);
    ret->protocol = str_lit("openai-chat");
    ret->stream_framing = SWITCHYARD_ADAPTER_TYPES_STREAM_FRAMING_SSE;
}

exports_switchyard_adapter_adapter_own_session_t exports_switchyard_adapter_adapter_constructor_session(
    exports_switchyard_adapter_adapter_source_context_t *context) {
    session_t *self = calloc(1, sizeof *self);
    if (!self) __builtin_trap();
    /* The context's strings and list are ours: keep them (the struct itself is the caller's). */
    self->ctx = *context;
    return exports_switchyard_adapter_adapter_session_new(self);
}

void exports_switchyard_adapter_adapter_session_destructor(session_t *self) {
    switchyard_adapter_types_source_context_free(&self->ctx);
    free(self);
}

/* ---- transform-request ---------------------------------------------------------------- */

bool exports_switchyard_adapter_adapter_method_session_transform_request(
    session_t *self, string_t *request, exports_switchyard_adapter_adapter_http_request_t *ret,
    adapter_error_t *err) {
    bool ok = false;
    buf_t body = {0}, message = {0};
    if (self->ctx.operation != SWITCHYARD_ADAPTER_TYPES_OPERATION_CHAT) {
        set_error_text(err, KIND_UNSUPPORTED, ADAPTER_NAME " does chat completions only");
        goto out;
    }
    const string_t *secret = setting(self, "signing_secret");
    if (!secret || secret->len == 0) {
        /* The operator's mistake, not the client's: a kind other than bad-request/unsupported
         * lets the gateway try other adapters' sources, and the message says what to fix. */
        buf_puts(&message, "source `");
        buf_put_utf8_prefix(&message, self->ctx.source_name.ptr, self->ctx.source_name.len, 200);
        buf_puts(&message, "` has no `signing_secret` setting; " ADAPTER_NAME " signs every request with it");
        set_error(err, KIND_AUTH, &message);
        goto out;
    }
    const string_t *usage = setting(self, "stream_usage");
    bool stream_usage = !(usage && str_eq(usage, "false"));
    bool streaming;
    if (!openai_upstream_body(request->ptr, request->len, self->ctx.upstream_model.ptr, self->ctx.upstream_model.len,
                              stream_usage, &body, &streaming)) {
        set_error_text(err, KIND_BAD_REQUEST, "the request is not one JSON object");
        goto out;
    }

    /* The signature: HMAC-SHA256(secret, timestamp "." body), hex. */
    buf_t timestamp = {0};
    buf_put_u64(&timestamp, switchyard_adapter_host_now_unix_ms() / 1000);
    hmac_sha256_ctx mac;
    uint8_t digest[SHA256_DIGEST_SIZE];
    hmac_sha256_init(&mac, secret->ptr, secret->len);
    hmac_sha256_update(&mac, timestamp.ptr, timestamp.len);
    hmac_sha256_update(&mac, ".", 1);
    hmac_sha256_update(&mac, body.ptr, body.len);
    hmac_sha256_final(&mac, digest);
    char signature[7 + 2 * SHA256_DIGEST_SIZE] = "sha256=";
    hex_encode(digest, SHA256_DIGEST_SIZE, signature + 7);

    headers_t headers = {0};
    header_add(&headers, "content-type", str_lit("application/json"));
    if (self->ctx.api_key.len > 0) {
        buf_t auth = {0};
        buf_puts(&auth, "Bearer ");
        buf_put(&auth, self->ctx.api_key.ptr, self->ctx.api_key.len);
        header_add(&headers, "authorization", str_take(&auth));
    }
    if (streaming) header_add(&headers, "accept", str_lit("text/event-stream"));
    header_add(&headers, "x-signature-timestamp", str_take(&timestamp));
    header_add(&headers, "x-signature", str_copy(signature, sizeof signature));
    /* `header.NAME: value` settings become extra headers, as with the built-in adapters. */
    for (size_t i = 0; i < self->ctx.settings.len; i++) {
        const string_t *k = &self->ctx.settings.ptr[i].f0, *v = &self->ctx.settings.ptr[i].f1;
        if (k->len > 7 && memcmp(k->ptr, "header.", 7) == 0)
            header_push(&headers, str_copy(k->ptr + 7, k->len - 7), str_copy(v->ptr, v->len));
    }

    buf_t url = {0};
    buf_put(&url, self->ctx.base_url.ptr, self->ctx.base_url.len);
    const string_t *path = setting(self, "path");
    if (path && path->len > 0) {
        if (path->ptr[0] != '/') buf_puts(&url, "/");
        buf_put(&url, path->ptr, path->len);
    } else {
        buf_puts(&url, "/chat/completions");
    }

    ret->method = str_lit("POST");
    ret->url = str_take(&url);
    ret->headers.ptr = headers.len ? headers.ptr : NULL;
    ret->headers.len = headers.len;
    ret->body.ptr = body.ptr; /* moved: post-return frees it */
    ret->body.len = body.len;
    body.ptr = NULL;
    ok = true;
out:
    buf_free(&body);
    adapter_world_string_free(request); /* the argument is ours */
    return ok;
}

/* ---- transform-response --------------------------------------------------------------- */

static const string_t *response_header(const switchyard_adapter_types_http_response_t *r, const char *name) {
    for (size_t i = 0; i < r->headers.len; i++)
        if (str_eq_nocase(&r->headers.ptr[i].f0, name)) return &r->headers.ptr[i].f1;
    return NULL;
}

bool exports_switchyard_adapter_adapter_method_session_transform_response(
    session_t *self, exports_switchyard_adapter_adapter_http_response_t *response, string_t *ret,
    adapter_error_t *err) {
    (void)self;
    bool ok = false;
    const uint8_t *body = response->body.ptr;
    size_t n = response->body.len;
    if (response->status < 200 || response->status > 299) {
        upstream_error e;
        openai_upstream_error(response->status, body, n, &e);
        set_error(err, e.kind, &e.message);
        err->status.is_some = true;
        err->status.val = response->status;
        const string_t *retry = response_header(response, "retry-after");
        uint64_t ms;
        if (retry && parse_retry_after_ms(retry->ptr, retry->len, &ms)) {
            err->retry_after_ms.is_some = true;
            err->retry_after_ms.val = ms;
        }
        if (e.has_code) {
            err->code.is_some = true;
            err->code.val = str_take(&e.code);
        }
        buf_free(&e.code);
        goto out;
    }
    /* 2xx: passed through byte for byte, once we know it is UTF-8 text holding a JSON object
     * (a string return must be valid UTF-8, or the host cannot take it). */
    size_t start = 0;
    while (start < n && (body[start] == ' ' || body[start] == '\t' || body[start] == '\r' || body[start] == '\n'))
        start++;
    if (start == n || body[start] != '{' || !utf8_valid(body, n)) {
        buf_t message = {0};
        buf_puts(&message, "upstream answered HTTP ");
        buf_put_u64(&message, response->status);
        buf_puts(&message, " with something other than a JSON object: ");
        buf_put_utf8_prefix(&message, body, n, 200);
        set_error(err, KIND_INVALID_RESPONSE, &message);
        err->status.is_some = true;
        err->status.val = response->status;
        goto out;
    }
    /* Move the body into the return value instead of copying it: it is ours, and it was
     * allocated by our cabi_realloc, so post-return may free it. */
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

static void empty_output(stream_output_t *ret, bool done) {
    ret->chunks.ptr = NULL;
    ret->chunks.len = 0;
    ret->done = done;
}

bool exports_switchyard_adapter_adapter_method_session_transform_stream_chunk(
    session_t *self, exports_switchyard_adapter_adapter_stream_event_t *event, stream_output_t *ret,
    adapter_error_t *err) {
    bool ok = true;
    const uint8_t *data = event->data.ptr;
    size_t a = 0, z = event->data.len;
    while (a < z && (data[a] == ' ' || data[a] == '\t' || data[a] == '\r' || data[a] == '\n')) a++;
    while (z > a && (data[z - 1] == ' ' || data[z - 1] == '\t' || data[z - 1] == '\r' || data[z - 1] == '\n')) z--;
    if (z - a == 6 && memcmp(data + a, "[DONE]", 6) == 0) {
        self->done = true;
        empty_output(ret, true);
        goto out;
    }
    if (z == a || self->done) { /* keep-alives, and anything after [DONE] */
        empty_output(ret, self->done);
        goto out;
    }
    switch (openai_classify_chunk(data + a, z - a)) {
        case CHUNK_INVALID: {
            buf_t message = {0};
            buf_puts(&message, "stream event is not a JSON object: ");
            buf_put_utf8_prefix(&message, data + a, z - a, 200);
            set_error(err, KIND_INVALID_RESPONSE, &message);
            ok = false;
            goto out;
        }
        case CHUNK_ERROR: {
            buf_t message = {0};
            openai_error_message(data + a, z - a, &message);
            set_error(err, KIND_SERVER, &message);
            ok = false;
            goto out;
        }
        case CHUNK_FINISHED:
            self->finished = true;
            break;
        case CHUNK_PASS:
            break;
    }
    /* Pass the chunk through: the event's data string is ours, so it becomes the chunk. */
    string_t *chunks = malloc(sizeof *chunks);
    if (!chunks) __builtin_trap();
    chunks[0] = event->data;
    event->data.ptr = NULL;
    event->data.len = 0;
    ret->chunks.ptr = chunks;
    ret->chunks.len = 1;
    ret->done = false;
out:
    switchyard_adapter_types_stream_event_free(event);
    return ok;
}

bool exports_switchyard_adapter_adapter_method_session_finish_stream(session_t *self, stream_output_t *ret,
                                                                     adapter_error_t *err) {
    /* Some compatible servers close right after the finish_reason, without [DONE]: complete. */
    if (self->done || self->finished) {
        empty_output(ret, true);
        return true;
    }
    set_error_text(err, KIND_TRUNCATED, "upstream stream ended before [DONE] or a finish_reason");
    return false;
}
