/*
 * counters.c - where libFuzzer's inline 8-bit coverage counters of the
 * fuzz_trace binary lie, for fuzz_trace.c's forked reads (which hand their
 * counters back). They are the linker's __sancov_cntrs section, bounded by
 * the __start_/__stop_ symbols the linker defines for it (the names clang's
 * -fsanitize-coverage=inline-8bit-counters gives the section on ELF).
 *
 * Built without the fuzzer's instrumentation (tests/fuzz/CMakeLists.txt):
 * a translation unit that the coverage pass instruments must not declare
 * these symbols itself, or the pass gives its own references other names
 * and the binary registers no counters with libFuzzer at all.
 */
#include <stddef.h>
#include <stdint.h>

#include "counters.h"

extern uint8_t __start___sancov_cntrs[] __attribute__((weak, visibility("hidden")));
extern uint8_t __stop___sancov_cntrs[] __attribute__((weak, visibility("hidden")));

uint8_t *fuzz_counters(size_t *n)
{
    *n = 0;
    if (!__start___sancov_cntrs || __stop___sancov_cntrs <= __start___sancov_cntrs) return NULL;
    *n = (size_t)(__stop___sancov_cntrs - __start___sancov_cntrs);
    return __start___sancov_cntrs;
}
