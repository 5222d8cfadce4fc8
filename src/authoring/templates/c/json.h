/* A small, bounded, non-recursive JSON scanner: enough to walk objects and arrays, find keys,
 * copy raw values and decode strings, without building a tree. Every function takes the text
 * as (pointer, length), never reads past it, and fails cleanly on malformed input. Nesting is
 * limited to JSON_MAX_DEPTH; nothing here allocates. */
#ifndef ADAPTER_JSON_H
#define ADAPTER_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 512

/* A byte range [start, end) of the text. */
typedef struct {
    size_t start, end;
} json_span;

/* Index of the first non-whitespace byte at or after i (n if none). */
size_t json_ws(const uint8_t *s, size_t n, size_t i);

/* Skips one JSON value starting at *i (after whitespace); on success *i is just past it. */
bool json_skip_value(const uint8_t *s, size_t n, size_t *i);

/* Walks the members of an object (or the elements of an array), in order. Open it at the
 * value's start (whitespace allowed before the bracket); then each json_*_next returns 1 with
 * the raw key span (quotes included) and raw value span, 0 after the closing bracket (it.pos is
 * then just past it), -1 on malformed input. */
typedef struct {
    size_t pos;
    bool first;
} json_iter;

bool json_object_open(const uint8_t *s, size_t n, size_t at, json_iter *it);
int json_object_next(const uint8_t *s, size_t n, json_iter *it, json_span *key, json_span *value);
bool json_array_open(const uint8_t *s, size_t n, size_t at, json_iter *it);
int json_array_next(const uint8_t *s, size_t n, json_iter *it, json_span *value);

/* Length of the valid UTF-8 sequence at s[p] (1-4), or 0 if the bytes there are not one. */
size_t utf8_sequence(const uint8_t *s, size_t n, size_t p);
/* Whether all of data is valid UTF-8. */
bool utf8_valid(const uint8_t *data, size_t len);

/* Whether the JSON string at span (quotes included) decodes to the NUL-terminated ASCII `want`
 * (escapes such as "mod\u0065l" are understood). */
bool json_string_equals(const uint8_t *s, json_span str, const char *want);

/* Finds the first member named `key` in the object at span `obj`; its value span in *value. */
bool json_object_get(const uint8_t *s, json_span obj, const char *key, json_span *value);

/* Whether the value span is a JSON string / the literal null. */
bool json_is_string(const uint8_t *s, json_span value);
bool json_is_null(const uint8_t *s, json_span value);
bool json_is_true(const uint8_t *s, json_span value);

/* Decodes the JSON string at span (quotes included) as UTF-8 into out (at most cap bytes, cut
 * on a character boundary; lone surrogates and invalid UTF-8 bytes become U+FFFD). Returns the bytes written, and sets
 * *truncated when the string did not fit. */
size_t json_decode_string(const uint8_t *s, json_span str, uint8_t *out, size_t cap, bool *truncated);

#endif
