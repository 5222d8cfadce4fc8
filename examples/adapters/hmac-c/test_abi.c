/* Native test of the memory ownership: plays the host against the adapter, the way the canonical
 * ABI does it (arguments allocated with the guest's cabi_realloc, an empty one as a dummy
 * pointer; post-return after each call; the destructor at the end), under AddressSanitizer and
 * LeakSanitizer, so a leak, a double free or a free of a dummy pointer fails it. build.sh runs it:
 *   cc -fsanitize=address,undefined -Igen -I. -c gen/adapter_world.c -o gen.o
 *   cc -fsanitize=address,undefined -Igen -I. -Dexports_switchyard_adapter_adapter_session_new=test_session_new \
 *       test_abi.c adapter.c openai.c json.c sha256.c gen.o
 * (the -D lets the harness see the 64-bit rep the constructor registers: natively a pointer does
 * not fit the i32 handle the bindings would cast it to). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "adapter_world.h"

static int failures = 0;
#define EXPECT(ok, what) do { if (!(ok)) { printf("FAIL %s\n", what); failures++; } } while (0)
void __component_type_object_force_link_adapter_world(void) {}

void *cabi_realloc(void *ptr, size_t old_size, size_t align, size_t new_size);
uint8_t *__wasm_export_exports_switchyard_adapter_adapter_describe(void);
void __wasm_export_exports_switchyard_adapter_adapter_describe_post_return(uint8_t *);
int32_t __wasm_export_exports_switchyard_adapter_adapter_constructor_session(int32_t, uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t, uint8_t *, size_t);
uint8_t *__wasm_export_exports_switchyard_adapter_adapter_method_session_transform_request(uint8_t *, uint8_t *, size_t);
void __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_request_post_return(uint8_t *);
uint8_t *__wasm_export_exports_switchyard_adapter_adapter_method_session_transform_response(uint8_t *, int32_t, uint8_t *, size_t, uint8_t *, size_t);
void __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_response_post_return(uint8_t *);
uint8_t *__wasm_export_exports_switchyard_adapter_adapter_method_session_transform_stream_chunk(uint8_t *, uint8_t *, size_t, uint8_t *, size_t);
void __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_stream_chunk_post_return(uint8_t *);
uint8_t *__wasm_export_exports_switchyard_adapter_adapter_method_session_finish_stream(uint8_t *);
void __wasm_export_exports_switchyard_adapter_adapter_method_session_finish_stream_post_return(uint8_t *);
void __wasm_export_exports_switchyard_adapter_adapter_session_dtor(exports_switchyard_adapter_adapter_session_t *);

/* The host side: imports the adapter calls, and the resource intrinsics. */
void __wasm_import_switchyard_adapter_host_log(int32_t l, uint8_t *p, size_t n) { (void)l, (void)p, (void)n; }
int64_t __wasm_import_switchyard_adapter_host_now_unix_ms(void) { return 1717171717999; }
void __wasm_import_switchyard_adapter_host_script(uint8_t *p) { p[0] = 0; }
void __wasm_import_switchyard_adapter_host_fetch(uint8_t *a, size_t b, uint8_t *c, size_t d, int32_t e, uint8_t *f, size_t g, uint8_t *h) { abort(); }
void __wasm_import_exports_switchyard_adapter_adapter_session_drop(int32_t h) { abort(); }
int32_t __wasm_import_exports_switchyard_adapter_adapter_session_new(int32_t r) { abort(); }
int32_t __wasm_import_exports_switchyard_adapter_adapter_session_rep(int32_t h) { abort(); }
static exports_switchyard_adapter_adapter_session_t *last_rep;
exports_switchyard_adapter_adapter_own_session_t test_session_new(exports_switchyard_adapter_adapter_session_t *rep) {
    last_rep = rep;
    return (exports_switchyard_adapter_adapter_own_session_t){7};
}

/* How the host passes a string: copied into guest memory through cabi_realloc (a 0-byte request
 * answers a dummy pointer). */
static uint8_t *gstr(const char *s, size_t *len) {
    *len = strlen(s);
    uint8_t *p = cabi_realloc(NULL, 0, 1, *len);
    memcpy(p, s, *len);
    return p;
}
typedef struct { uint8_t *k; size_t kl; uint8_t *v; size_t vl; } pair;
static uint8_t *glist(const char **kv, size_t n) {
    pair *l = cabi_realloc(NULL, 0, 4, n * sizeof(pair));
    for (size_t i = 0; i < n; i++) { l[i].k = gstr(kv[2 * i], &l[i].kl); l[i].v = gstr(kv[2 * i + 1], &l[i].vl); }
    return (uint8_t *)l;
}

static exports_switchyard_adapter_adapter_session_t *session(const char **settings, size_t n, int op) {
    size_t a, b, c, d;
    uint8_t *s1 = gstr("src", &a), *s2 = gstr("https://api.example.com", &b), *s3 = gstr("", &c), *s4 = gstr("m", &d);
    __wasm_export_exports_switchyard_adapter_adapter_constructor_session(op, s1, a, s2, b, s3, c, s4, d, glist(settings, n), n);
    return last_rep;
}

static void request(exports_switchyard_adapter_adapter_session_t *s, const char *req, int ok) {
    size_t n;
    uint8_t *p = gstr(req, &n);
    uint8_t *r = __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_request((uint8_t *)s, p, n);
    EXPECT((r[0] == 0) == ok, req);
    __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_request_post_return(r);
}
static void response(exports_switchyard_adapter_adapter_session_t *s, int status, const char *body, int nheaders, int ok) {
    size_t n;
    uint8_t *p = gstr(body, &n);
    const char *h[] = {"Retry-After", "1.5", "content-type", "x"};
    uint8_t *r = __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_response((uint8_t *)s, status, glist(h, nheaders), nheaders, p, n);
    EXPECT((r[0] == 0) == ok, body);
    __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_response_post_return(r);
}
static void chunk(exports_switchyard_adapter_adapter_session_t *s, const char *data, int ok) {
    size_t a, b;
    uint8_t *e = gstr("message", &a), *d = gstr(data, &b);
    uint8_t *r = __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_stream_chunk((uint8_t *)s, e, a, d, b);
    EXPECT((r[0] == 0) == ok, data);
    __wasm_export_exports_switchyard_adapter_adapter_method_session_transform_stream_chunk_post_return(r);
}
static void finish(exports_switchyard_adapter_adapter_session_t *s, int ok) {
    uint8_t *r = __wasm_export_exports_switchyard_adapter_adapter_method_session_finish_stream((uint8_t *)s);
    EXPECT((r[0] == 0) == ok, "finish-stream");
    __wasm_export_exports_switchyard_adapter_adapter_method_session_finish_stream_post_return(r);
}

int main(void) {
    uint8_t *d = __wasm_export_exports_switchyard_adapter_adapter_describe();
    __wasm_export_exports_switchyard_adapter_adapter_describe_post_return(d);
    const char *good[] = {"signing_secret", "s", "header.x-a", "b", "path", "/v2", "empty", ""};
    const char *none[] = {"other", ""};
    exports_switchyard_adapter_adapter_session_t *s = session(good, 4, 0);
    request(s, "{\"model\":\"x\",\"stream\":true,\"messages\":[]}", 1);
    request(s, "not json", 0);
    request(s, "", 0);
    response(s, 200, "{\"choices\":[]}", 2, 1);
    response(s, 200, "", 0, 0);
    response(s, 200, "\xff{", 0, 0);
    response(s, 429, "{\"error\":{\"message\":\"slow\",\"code\":\"rate_limit_exceeded\"}}", 2, 0);
    response(s, 500, "", 0, 0);
    response(s, 502, "\xff\xfe garbage", 1, 0);
    chunk(s, "{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}", 1);
    chunk(s, "", 1);
    chunk(s, "garbage", 0);
    chunk(s, "{\"error\":{\"message\":\"boom\"}}", 0);
    chunk(s, "{\"error\":\"plain\"}", 0);
    finish(s, 0);
    chunk(s, "{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}", 1);
    chunk(s, " [DONE] ", 1);
    chunk(s, "after", 1);
    finish(s, 1);
    __wasm_export_exports_switchyard_adapter_adapter_session_dtor(s);
    s = session(none, 1, 0); /* no signing_secret */
    request(s, "{}", 0);
    __wasm_export_exports_switchyard_adapter_adapter_session_dtor(s);
    s = session(none, 0, 1); /* embedding: unsupported */
    request(s, "{}", 0);
    __wasm_export_exports_switchyard_adapter_adapter_session_dtor(s);
    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    puts("ownership test passes (sanitizers report leaks at exit)");
    return 0;
}
