/* setjmp/longjmp for wasm32 with LLVM's exception-based lowering (-mllvm -wasm-enable-sjlj):
 * Debian's wasi-libc (2022) ships neither this header nor libsetjmp.a. */
#ifndef SWITCHYARD_SETJMP_H
#define SWITCHYARD_SETJMP_H

typedef unsigned long long jmp_buf[8];

int setjmp(jmp_buf env) __attribute__((returns_twice));
void longjmp(jmp_buf env, int val) __attribute__((noreturn));

/* Lua 5.1 with LUA_USE_POSIX uses the signal-mask-free variants; WASI has no signals. */
#define _setjmp setjmp
#define _longjmp longjmp

#endif
