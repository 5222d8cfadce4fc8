/* The runtime LLVM's wasm sjlj lowering calls: setjmp records which call frame and label to
 * come back to; longjmp throws a wasm exception tagged __c_longjmp carrying the target. */
#include <stdint.h>

struct jmp_buf_impl {
    void *func_invocation_id;
    uint32_t label;
    struct arg {
        void *env;
        int val;
    } arg;
};

/* The exception tag; the link fails without it. */
__asm__(".globl __c_longjmp\n"
        ".tagtype __c_longjmp i32\n"
        "__c_longjmp:\n");

void __wasm_setjmp(void *env, uint32_t label, void *func_invocation_id) {
    struct jmp_buf_impl *jb = env;
    jb->func_invocation_id = func_invocation_id;
    jb->label = label;
}

uint32_t __wasm_setjmp_test(void *env, void *func_invocation_id) {
    struct jmp_buf_impl *jb = env;
    return jb->func_invocation_id == func_invocation_id ? jb->label : 0;
}

void __wasm_longjmp(void *env, int val) {
    struct jmp_buf_impl *jb = env;
    struct arg *arg = &jb->arg;
    arg->env = env;
    arg->val = val == 0 ? 1 : val;
    __builtin_wasm_throw(1, arg);
}
