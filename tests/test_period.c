/*
 * test_period.c - the autocorrelation period finder (policies/period.h):
 * every lag's correlation against gsl_stats_correlation computed lag by
 * lag, the period of noisy repeating series (whole and fractional), and
 * the series that have none (white noise, constant, too short, too long).
 */
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "policies/period.h"

static double unit(uint64_t *s) /* xorshift64*, uniform in [0, 1) */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* A sawtooth of `period` samples (fractional allowed) around an offset of
 * about 4 GiB, as allocated bytes are, plus uniform noise of `noise`. */
static void sawtooth(double *x, size_t n, double period, double noise, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double ph = fmod((double)i, period) / period;
        x[i] = 4e9 + 1e9 * ph + noise * 1e9 * (unit(&seed) - 0.5);
    }
}

static void test_correlations_match_gsl(void)
{
    gm_period_work *w = malloc(sizeof *w); /* as its users hold it: on the heap */
    CU_ASSERT_FATAL(w != NULL);
    static double x[GM_PERIOD_WIN];
    const size_t sizes[] = {16, 17, 100, 517, 1000, GM_PERIOD_WIN};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t];
        sawtooth(x, n, 23.0 + (double)t, 0.3, 7 + t);
        double conf;
        gm_period_lag(w, x, n, &conf);
        double worst = 0;
        for (size_t L = 1; L <= n / 2; L++) {
            double want = gsl_stats_correlation(x, 1, x + L, 1, n - L);
            double d = fabs(w->r[L] - want);
            worst = d > worst ? d : worst;
        }
        CU_ASSERT(worst < 1e-9);
    }
    free(w);
}

/* Every lag's correlation as the scalar formula gives it, to the bit, from
 * the cross sums and prefix sums the library leaves in its scratch,
 * whichever vectors it may use (gm_period_vectors: scalar, SSE2 two lags
 * at a time, AVX four where this CPU has it; n's below cover every
 * remainder of the lanes); with lags whose variance is 0 (a series
 * constant at its end) among them. The period and its confidence are the
 * same at every width too. */
static void test_lags_to_the_bit(void)
{
    gm_period_work *w = malloc(sizeof *w);
    CU_ASSERT_FATAL(w != NULL);
    static double x[GM_PERIOD_WIN];
    const size_t sizes[] = {16, 17, 18, 19, 20, 21, 22, 23, 101, 517, 1000, 1023, GM_PERIOD_WIN};
    for (size_t t = 0; t < 2 * sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t / 2];
        sawtooth(x, n, 11.0 + (double)t, 0.2, 3 + t);
        if (t % 2) /* constant over the last third: v[L..n) has no variance for the largest lags */
            for (size_t i = n - n / 3; i < n; i++)
                x[i] = 5e9;
        double lag[3], conf[3];
        for (int vec = 0; vec <= 2; vec++) {
            gm_period_vectors(vec);
            lag[vec] = gm_period_lag(w, x, n, &conf[vec]);
            size_t off = 0;
            for (size_t L = 1; L <= n / 2; L++) {
                const double *s1 = w->ps1, *s2 = w->ps2;
                double k = (double)(n - L);
                double a1 = s1[n - L], a2 = s2[n - L], b1 = s1[n] - s1[L], b2 = s2[n] - s2[L];
                double cov = w->fft[L] - a1 * b1 / k;
                double va = a2 - a1 * a1 / k, vb = b2 - b1 * b1 / k;
                double want = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0;
                off += memcmp(&want, &w->r[L], sizeof want) != 0;
            }
            CU_ASSERT_EQUAL(off, 0);
        }
        gm_period_vectors(2);
        CU_ASSERT(memcmp(&lag[0], &lag[1], sizeof *lag) == 0 &&
                  memcmp(&lag[0], &lag[2], sizeof *lag) == 0);
        CU_ASSERT(memcmp(&conf[0], &conf[1], sizeof *conf) == 0 &&
                  memcmp(&conf[0], &conf[2], sizeof *conf) == 0);
    }
    free(w);
}

static void test_finds_the_period(void)
{
    static gm_period_work w; /* and in static storage */
    static double x[GM_PERIOD_WIN];
    const double periods[] = {20.0, 37.5, 100.0, 250.0};
    for (size_t t = 0; t < sizeof periods / sizeof *periods; t++) {
        sawtooth(x, GM_PERIOD_WIN, periods[t], 0.2, 99 + t);
        double conf, lag = gm_period_lag(&w, x, GM_PERIOD_WIN, &conf);
        CU_ASSERT(fabs(lag - periods[t]) < 0.5);
        CU_ASSERT(conf >= 0.5 && conf <= 1.0);
    }
    /* the same series, repeated calls: the same answer (plans are reused) */
    sawtooth(x, GM_PERIOD_WIN, 37.5, 0.2, 5);
    double c1, c2, l1 = gm_period_lag(&w, x, GM_PERIOD_WIN, &c1);
    double l2 = gm_period_lag(&w, x, GM_PERIOD_WIN, &c2);
    CU_ASSERT(l1 == l2 && c1 == c2);
}

static void test_no_period(void)
{
    static gm_period_work w;
    static double x[GM_PERIOD_WIN + 1];
    double conf = -1;
    uint64_t s = 3;
    for (size_t i = 0; i < GM_PERIOD_WIN; i++)
        x[i] = 1e9 * unit(&s); /* white noise */
    CU_ASSERT(gm_period_lag(&w, x, GM_PERIOD_WIN, &conf) == 0);
    CU_ASSERT(conf == 0);
    for (size_t i = 0; i <= GM_PERIOD_WIN; i++)
        x[i] = 3e9; /* constant */
    conf = -1;
    CU_ASSERT(gm_period_lag(&w, x, GM_PERIOD_WIN, &conf) == 0);
    CU_ASSERT(conf == 0);
    sawtooth(x, GM_PERIOD_WIN + 1, 10.0, 0.0, 1);
    CU_ASSERT(gm_period_lag(&w, x, 15, &conf) == 0);                /* too short */
    CU_ASSERT(gm_period_lag(&w, x, GM_PERIOD_WIN + 1, &conf) == 0); /* too long */
}

int gm_test_register(void)
{
    CU_pSuite s = CU_add_suite("period", NULL, NULL);
    if (!s) return CU_get_error();
    GM_ADD_TEST(s, test_correlations_match_gsl);
    GM_ADD_TEST(s, test_lags_to_the_bit);
    GM_ADD_TEST(s, test_finds_the_period);
    GM_ADD_TEST(s, test_no_period);
    return CUE_SUCCESS;
}
