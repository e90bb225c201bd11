/*
 * cu.h - the tiny harness every tests/test_<module>.c uses: a test file
 * defines gm_test_register(), which adds its CUnit suite(s); cu_main.c runs
 * them and exits non-zero if any assertion failed.
 */
#ifndef GM_TESTS_CU_H
#define GM_TESTS_CU_H

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>

/* Defined by each test file: add suites, return 0 or a CUnit error. */
int gm_test_register(void);

/* Path of a file under the source tree: tests/data/x -> GM_SOURCE_DIR "/tests/data/x". */
const char *gm_test_path(const char *rel);
/* A fresh temporary file path (in the build dir), unique per call. */
const char *gm_test_tmp(const char *name);

#define GM_ADD_TEST(suite, fn)                                                                     \
    do {                                                                                           \
        if (!CU_add_test(suite, #fn, fn)) return CU_get_error();                                   \
    } while (0)

#endif
