/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), freestanding: no libc calls, no allocation. */
#ifndef HMAC_C_SHA256_H
#define HMAC_C_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BLOCK_SIZE 64
#define SHA256_DIGEST_SIZE 32

typedef struct {
    uint32_t state[8];
    uint64_t total_len; /* bytes hashed so far */
    uint8_t block[SHA256_BLOCK_SIZE];
    size_t block_len; /* bytes buffered in block */
} sha256_ctx;

void sha256_init(sha256_ctx *ctx);
void sha256_update(sha256_ctx *ctx, const void *data, size_t len);
void sha256_final(sha256_ctx *ctx, uint8_t out[SHA256_DIGEST_SIZE]);
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]);

typedef struct {
    sha256_ctx inner;
    sha256_ctx outer;
} hmac_sha256_ctx;

void hmac_sha256_init(hmac_sha256_ctx *ctx, const void *key, size_t key_len);
void hmac_sha256_update(hmac_sha256_ctx *ctx, const void *data, size_t len);
void hmac_sha256_final(hmac_sha256_ctx *ctx, uint8_t out[SHA256_DIGEST_SIZE]);
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                 uint8_t out[SHA256_DIGEST_SIZE]);

/* Writes 2*len lowercase hex digits to out (no NUL terminator). */
void hex_encode(const uint8_t *in, size_t len, char *out);

#endif
