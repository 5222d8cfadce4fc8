/* Native tests of openai.c and json.c: the upstream body rewrite (escaped keys, duplicates,
 * nesting, hostile input), chunk classification, error bodies and Retry-After.
 * cc -O1 -g -fsanitize=address,undefined -o /tmp/test_openai test_openai.c openai.c json.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "openai.h"

static int failures = 0;

#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            printf("FAIL line %d: ", __LINE__);   \
            printf(__VA_ARGS__);                  \
            printf("\n");                         \
            failures++;                           \
        }                                         \
    } while (0)

static void body(const char *req, bool stream_usage, const char *want) {
    buf_t out = {0};
    bool streaming;
    bool ok = openai_upstream_body((const uint8_t *)req, strlen(req), (const uint8_t *)"up\"model", 8,
                                   stream_usage, &out, &streaming);
    if (!want) {
        CHECK(!ok, "accepted %s", req);
    } else {
        CHECK(ok && out.len == strlen(want) && memcmp(out.ptr, want, out.len) == 0, "body of %s\n  got  %.*s\n  want %s",
              req, (int)out.len, out.ptr ? (char *)out.ptr : "", want);
    }
    buf_free(&out);
}

static void error_case(uint16_t status, const char *resp, error_kind kind, const char *message, const char *code) {
    upstream_error e;
    openai_upstream_error(status, (const uint8_t *)resp, strlen(resp), &e);
    CHECK(e.kind == kind, "kind of %d %s: got %d want %d", status, resp, e.kind, kind);
    CHECK(e.message.len == strlen(message) && memcmp(e.message.ptr, message, e.message.len) == 0,
          "message of %s: got '%.*s' want '%s'", resp, (int)e.message.len, (char *)e.message.ptr, message);
    CHECK(utf8_valid(e.message.ptr, e.message.len), "message not UTF-8");
    if (code) {
        CHECK(e.has_code && e.code.len == strlen(code) && memcmp(e.code.ptr, code, e.code.len) == 0, "code of %s", resp);
    } else {
        CHECK(!e.has_code, "unexpected code for %s", resp);
    }
    buf_free(&e.message);
    buf_free(&e.code);
}

int main(void) {
    const char *M = "\"model\":\"up\\\"model\"";
    char want[512];

    /* The model replaced in place, other members byte for byte. */
    snprintf(want, sizeof want, "{%s,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", M);
    body("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", true, want);
    /* Whitespace around everything; a nested "model" and a string containing "model" untouched. */
    snprintf(want, sizeof want, "{\"a\":{\"model\":\"keep\"},%s,\"b\":\"\\\"model\\\":\\\"x\\\"\"}", M);
    body(" \n{ \"a\" : {\"model\":\"keep\"} , \"model\" : \"m\" , \"b\":\"\\\"model\\\":\\\"x\\\"\" } \n", true, want);
    /* An escaped key is still "model"; the duplicate goes. */
    snprintf(want, sizeof want, "{%s,\"x\":1}", M);
    body("{\"mod\\u0065l\":\"m\",\"x\":1,\"model\":\"evil\"}", true, want);
    /* No model: added. Empty object. */
    snprintf(want, sizeof want, "{\"x\":[1,2,{\"y\":null}],%s}", M);
    body("{\"x\":[1,2,{\"y\":null}]}", true, want);
    snprintf(want, sizeof want, "{%s}", M);
    body("{}", true, want);
    /* Gateway fields dropped; stream asks for usage unless the request has stream_options. */
    snprintf(want, sizeof want, "{%s,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", M);
    body("{\"model\":\"m\",\"disable_thinking\":true,\"stream\":true,\"top_k\":3,\"thinking\":{\"type\":\"enabled\"}}", true, want);
    snprintf(want, sizeof want, "{%s,\"stream\":true,\"stream_options\":{\"include_usage\":false}}", M);
    body("{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":false}}", true, want);
    snprintf(want, sizeof want, "{%s,\"stream\":true}", M);
    body("{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}", false, want);
    snprintf(want, sizeof want, "{%s,\"stream\":false}", M);
    body("{\"model\":\"m\",\"stream\":false}", true, want);

    /* Hostile or malformed input is refused, never crashes. */
    const char *bad[] = {
        "", " ", "[]", "\"model\"", "{", "{\"model\"", "{\"model\":", "{\"model\":\"m\"", "{\"model\":\"m\",}",
        "{\"model\":\"m\"}}", "{\"model\":\"m\"} x", "{\"a\":[1,2}", "{\"a\":{\"b\":1]}", "{\"a\":\"\\x\"}",
        "{\"a\":\"\\u12\"}", "{\"a\":\"\x01\"}", "{\"a\":tru}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":1e}",
        "{\"a\" 1}", "{a:1}", "{\"a\":1,,\"b\":2}", "{\"a\":\"unterminated}", "{\"a\":\"x\\",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) body(bad[i], true, NULL);
    {
        /* Nesting deeper than JSON_MAX_DEPTH is refused; just under it is fine. */
        size_t depth = 100000;
        char *deep = malloc(2 * depth + 16);
        size_t n = 0;
        n += sprintf(deep, "{\"a\":");
        for (size_t i = 0; i < depth; i++) deep[n++] = '[';
        for (size_t i = 0; i < depth; i++) deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = 0;
        body(deep, true, NULL);
        n = sprintf(deep, "{\"a\":");
        for (size_t i = 0; i < JSON_MAX_DEPTH; i++) deep[n++] = '[';
        for (size_t i = 0; i < JSON_MAX_DEPTH; i++) deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = 0;
        buf_t out = {0};
        bool streaming;
        CHECK(openai_upstream_body((uint8_t *)deep, n, (const uint8_t *)"m", 1, true, &out, &streaming),
              "depth %d refused", JSON_MAX_DEPTH);
        buf_free(&out);
        free(deep);
    }
    {
        /* Every prefix of a valid request is refused without reading past it (ASan checks). */
        const char *req = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"H\\u00e9\\ud83d\\ude00\"}],"
                          "\"temperature\":-1.5e-3,\"stream\":true,\"n\":null}";
        size_t len = strlen(req);
        for (size_t cut = 0; cut < len; cut++) {
            char *p = malloc(cut ? cut : 1);
            memcpy(p, req, cut);
            buf_t out = {0};
            bool streaming;
            CHECK(!openai_upstream_body((uint8_t *)p, cut, (const uint8_t *)"m", 1, true, &out, &streaming),
                  "prefix %zu accepted", cut);
            free(p);
        }
    }

    /* Stream chunks. */
    struct {
        const char *data;
        chunk_class want;
    } chunks[] = {
        {"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}", CHUNK_PASS},
        {"{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}", CHUNK_FINISHED},
        {"{\"choices\":[{\"index\":0},{\"index\":1,\"finish_reason\":\"length\"}]}", CHUNK_FINISHED},
        {"{\"choices\":[],\"usage\":{\"prompt_tokens\":1}}", CHUNK_PASS},
        {"{\"choices\":[{\"delta\":{\"finish_reason\":\"stop\"}}]}", CHUNK_PASS},
        {"{\"error\":{\"message\":\"boom\"}}", CHUNK_ERROR},
        {"not json", CHUNK_INVALID},
        {"{\"choices\":[", CHUNK_INVALID},
    };
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        chunk_class got = openai_classify_chunk((const uint8_t *)chunks[i].data, strlen(chunks[i].data));
        CHECK(got == chunks[i].want, "chunk %s: got %d want %d", chunks[i].data, got, chunks[i].want);
    }

    /* Error bodies. */
    error_case(429, "{\"error\":{\"message\":\"slow\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}",
               KIND_RATE_LIMIT, "slow", "rate_limit_exceeded");
    error_case(429, "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}",
               KIND_QUOTA, "You exceeded your current quota", "insufficient_quota");
    error_case(529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
               KIND_OVERLOADED, "Overloaded", NULL);
    error_case(500, "", KIND_SERVER, "upstream returned HTTP 500", NULL);
    error_case(502, "  <html>bad gateway</html>\n", KIND_SERVER, "<html>bad gateway</html>", NULL);
    error_case(404, "{\"error\":\"model not found\"}", KIND_NOT_FOUND, "model not found", NULL);
    error_case(400, "{\"error\":{\"message\":\"caf\\u00e9 \\ud800\",\"code\":\"content_filter\"}}", KIND_CONTENT_POLICY,
               "caf\xC3\xA9 \xEF\xBF\xBD", "content_filter");
    error_case(401, "{\"message\":\"bad key\"}", KIND_AUTH, "bad key", NULL);
    error_case(403, "{\"error\":{\"message\":\"no\",\"code\":42}}", KIND_PERMISSION, "no", NULL);
    error_case(402, "{}", KIND_QUOTA, "{}", NULL);
    error_case(422, "\xff\xfe", KIND_BAD_REQUEST, "\xEF\xBF\xBD\xEF\xBF\xBD", NULL);
    error_case(503, "{\"error\":{\"message\":", KIND_OVERLOADED, "{\"error\":{\"message\":", NULL);
    error_case(307, "", KIND_SERVER, "upstream returned HTTP 307", NULL);
    error_case(418, "", KIND_BAD_REQUEST, "upstream returned HTTP 418", NULL);
    {
        /* A long body is cut at 512 bytes on a character boundary, with an ellipsis. */
        char big[2000];
        for (int i = 0; i < 1998; i += 2) big[i] = (char)0xC3, big[i + 1] = (char)0xA9; /* é */
        big[1998] = 0;
        upstream_error e;
        openai_upstream_error(500, (uint8_t *)big, 1998, &e);
        CHECK(e.message.len == 512 + 3 && utf8_valid(e.message.ptr, e.message.len), "long body: %zu", e.message.len);
        buf_free(&e.message);
    }

    /* Retry-After. */
    struct {
        const char *v;
        bool ok;
        uint64_t ms;
    } ra[] = {{"20", true, 20000}, {" 1.5 ", true, 1500}, {"0", true, 0}, {".25", true, 250},
              {"2.0009", true, 2000}, {"Wed, 21 Oct 2015 07:28:00 GMT", false, 0}, {"", false, 0},
              {"-1", false, 0}, {"12345678901", false, 0}, {"5s", false, 0}};
    for (size_t i = 0; i < sizeof ra / sizeof ra[0]; i++) {
        uint64_t ms = 0;
        bool ok = parse_retry_after_ms((const uint8_t *)ra[i].v, strlen(ra[i].v), &ms);
        CHECK(ok == ra[i].ok && (!ok || ms == ra[i].ms), "Retry-After '%s': %d %llu", ra[i].v, ok,
              (unsigned long long)ms);
    }

    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    printf("all body/chunk/error tests pass\n");
    return 0;
}
