/* cu_main.c - runs the suites a test file registered; see cu.h. */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *gm_test_path(const char *rel)
{
    static char buf[8][4096];
    static int slot;
    char *b = buf[slot++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", GM_SOURCE_DIR, rel);
    return b;
}

const char *gm_test_tmp(const char *name)
{
    static char buf[8][4096];
    static int slot, serial;
    char *b = buf[slot++ % 8];
    snprintf(b, sizeof buf[0], "%s/tests/tmp-%d-%d-%s", GM_BINARY_DIR, (int)getpid(), serial++,
             name);
    return b;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    if (gm_test_register() != CUE_SUCCESS) {
        fprintf(stderr, "cannot register tests: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed ? 1 : 0;
}
