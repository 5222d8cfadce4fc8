/* The OpenAI wire logic of the adapter, independent of the generated bindings so that it can be
 * tested natively (test_openai.c): the upstream body, stream chunks, error bodies, Retry-After.
 * Output buffers come from malloc; an allocation failure traps (as any guest OOM does). */
#ifndef HMAC_C_OPENAI_H
#define HMAC_C_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer. Zero-initialise; hand ptr to the bindings (which free it) or buf_free. */
typedef struct {
    uint8_t *ptr;
    size_t len, cap;
} buf_t;

void buf_put(buf_t *b, const void *data, size_t len);
void buf_puts(buf_t *b, const char *text);
void buf_put_u64(buf_t *b, uint64_t v);
/* Appends `text` as a JSON string literal (quotes, escapes). */
void buf_put_json_string(buf_t *b, const uint8_t *text, size_t len);
/* Appends at most max bytes of `data` as valid UTF-8: invalid bytes become U+FFFD, a cut never
 * splits a character, "…" marks a cut. */
void buf_put_utf8_prefix(buf_t *b, const uint8_t *data, size_t len, size_t max);
void buf_free(buf_t *b);

/* Builds the upstream body from the unified request: the top-level "model" set to `model`
 * (added if absent, later duplicates dropped), gateway-only fields (disable_thinking, thinking,
 * top_k) dropped, and on a stream `"stream_options":{"include_usage":true}` added unless the
 * request has stream_options; stream_usage=false removes stream_options instead. Every other
 * member is copied byte for byte, in order. Returns false (out untouched) if the request is not
 * one JSON object; *streaming says whether "stream" is true. */
bool openai_upstream_body(const uint8_t *req, size_t n, const uint8_t *model, size_t model_len,
                          bool stream_usage, buf_t *out, bool *streaming);

typedef enum {
    CHUNK_PASS,     /* an ordinary chunk */
    CHUNK_FINISHED, /* a chunk with a non-null choices[].finish_reason */
    CHUNK_ERROR,    /* an {"error": ...} event */
    CHUNK_INVALID,  /* not a JSON object */
} chunk_class;

chunk_class openai_classify_chunk(const uint8_t *data, size_t n);

/* Error kinds, numbered as the WIT enum error-kind (adapter.c checks that they agree). */
typedef enum {
    KIND_BAD_REQUEST,
    KIND_AUTH,
    KIND_PERMISSION,
    KIND_NOT_FOUND,
    KIND_RATE_LIMIT,
    KIND_QUOTA,
    KIND_OVERLOADED,
    KIND_SERVER,
    KIND_CONTENT_POLICY,
    KIND_INVALID_RESPONSE,
    KIND_TRUNCATED,
    KIND_UNSUPPORTED,
} error_kind;

#define ERROR_MESSAGE_MAX 512
#define ERROR_CODE_MAX 64

/* What an upstream error body says: the message (error.message, a string "error", or a top-level
 * "message"; else a prefix of the body; else "upstream returned HTTP N"), OpenAI's error.code
 * when it is a string, and the kind by status and code. All text is valid UTF-8. */
typedef struct {
    error_kind kind;
    buf_t message;
    bool has_code;
    buf_t code;
} upstream_error;

void openai_upstream_error(uint16_t status, const uint8_t *body, size_t n, upstream_error *out);
/* Just the message of an {"error": ...} stream event (or a fixed text). */
void openai_error_message(const uint8_t *body, size_t n, buf_t *out);
error_kind openai_classify(uint16_t status, const char *code, const char *message);

/* Retry-After as seconds (fractions allowed, at most 10 digits before the point); false for an
 * HTTP date or anything else. */
bool parse_retry_after_ms(const uint8_t *value, size_t len, uint64_t *ms);

#endif
