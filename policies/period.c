/* period.c - see period.h. */
#include "period.h"

#include <fftw3.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif
#include <math.h>
#include <pthread.h>
#include <string.h>

#define FFT_N GM_PERIOD_FFT_N
#define FFT_C (FFT_N / 2 + 1) /* complex outputs of the real transform */

/* FFTW's two transforms of FFT_N real points, real to complex and back,
 * out of place (in place FFTW copies through a buffer: 1.23x the time),
 * planned once per process: FFTW's planner is not thread-safe, executing a
 * plan is, on any arrays of the planned ones' alignment
 * (fftw_execute_dft_r2c; FFTW manual, "New-array Execute Functions").
 * FFTW_ESTIMATE plans without timing runs and FFTW_NO_SIMD keeps to the
 * scalar codelets, so the plan and its rounding are the same on every
 * x86-64 CPU, run after run (FFTW picks SIMD codelets by the CPU, and AVX2
 * ones may fuse multiply-adds). Both transforms of FFT_N = 1536 points take
 * 22 k cycles here, the r2r half-complex ones of 2048 before 41 k (bench/README,
 * "Twenty-fourth round"). */
static fftw_plan fwd, inv;
static int plan_align;
static pthread_once_t plan_once = PTHREAD_ONCE_INIT;

static void make_plans(void)
{
    double *a = fftw_alloc_real(FFT_N);
    fftw_complex *c = fftw_alloc_complex(FFT_C);
    if (a && c && fftw_alignment_of(a) == fftw_alignment_of((double *)c)) {
        unsigned fl = FFTW_ESTIMATE | FFTW_NO_SIMD | FFTW_DESTROY_INPUT;
        fwd = fftw_plan_dft_r2c_1d(FFT_N, a, c, fl);
        inv = fftw_plan_dft_c2r_1d(FFT_N, c, a, fl);
        plan_align = fftw_alignment_of(a);
    }
    fftw_free(a);
    fftw_free(c);
}

/* Lagged cross sums c[L] = sum_i v_i v_(i+L) of the mean-removed series,
 * L = 0..n/2, through an FFT (zero-padded, so not circular): O(n log n)
 * instead of O(n^2), so a re-estimate every 16 samples stays cheap. Left
 * in w->fft; returns 0 when FFTW could not make its plans (out of memory). */
static int cross_sums(gm_period_work *w, const double *x, size_t n, double m)
{
    pthread_once(&plan_once, make_plans);
    if (!fwd || !inv) return 0;
    _Alignas(64) double tmp[FFT_N], tmpc[2 * FFT_C];
    int own = fftw_alignment_of(w->fft) == plan_align && fftw_alignment_of(w->spec) == plan_align;
    double *v = own ? w->fft : tmp;
    fftw_complex *c = (fftw_complex *)(own ? w->spec : tmpc);
    for (size_t i = 0; i < n; i++)
        v[i] = x[i] - m;
    memset(v + n, 0, (FFT_N - n) * sizeof *v);
    fftw_execute_dft_r2c(fwd, v, c);
    /* the power spectrum, scaled by 1/FFT_N for the unnormalized inverse */
    const double s = 1.0 / FFT_N;
    for (size_t k = 0; k < FFT_C; k++) {
        c[k][0] = (c[k][0] * c[k][0] + c[k][1] * c[k][1]) * s;
        c[k][1] = 0.0;
    }
    fftw_execute_dft_c2r(inv, c, v);
    if (!own) memcpy(w->fft, v, sizeof tmp);
    return 1;
}

/* The lags' correlations r[L0..n/2] from the cross sums (w->fft) and the
 * prefix sums s1, s2 of v and v^2 (formula in lags_scalar). */
static void lags_scalar(gm_period_work *w, size_t n, size_t L)
{
    const double *s1 = w->ps1, *s2 = w->ps2;
    for (; L <= n / 2; L++) {
        double k = (double)(n - L);
        double a1 = s1[n - L], a2 = s2[n - L];         /* v[0..n-L) */
        double b1 = s1[n] - s1[L], b2 = s2[n] - s2[L]; /* v[L..n)   */
        double cov = w->fft[L] - a1 * b1 / k;
        double va = a2 - a1 * a1 / k, vb = b2 - b1 * b1 / k;
        w->r[L] = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0;
    }
}

/* The vector paths do lags_scalar's operations in the same order, one lag
 * a lane: IEEE addition, multiplication, division and square root round
 * the same in a vector register (and no multiply-add is fused: neither
 * target has FMA), so r is the same to the bit whichever runs
 * (test_period holds each to the formula). A lag whose variance is not
 * positive takes the root of a product that may be negative (a NaN, no
 * trap) and is masked to 0, as the formula does. */
#ifdef __SSE2__
/* Two lags at a time (every x86-64 has SSE2); returns the first lag left. */
static size_t lags_sse2(gm_period_work *w, size_t n, size_t L)
{
    const double *s1 = w->ps1, *s2 = w->ps2;
    const __m128d zero = _mm_setzero_pd(), t1 = _mm_set1_pd(s1[n]), t2 = _mm_set1_pd(s2[n]);
    for (; L + 1 <= n / 2; L += 2) {
        __m128d k = _mm_set_pd((double)(n - L - 1), (double)(n - L));
        __m128d a1 = _mm_loadu_pd(&s1[n - L - 1]), a2 = _mm_loadu_pd(&s2[n - L - 1]);
        a1 = _mm_shuffle_pd(a1, a1, 1); /* lane 0: lag L, lane 1: L + 1 */
        a2 = _mm_shuffle_pd(a2, a2, 1);
        __m128d b1 = _mm_sub_pd(t1, _mm_loadu_pd(&s1[L])),
                b2 = _mm_sub_pd(t2, _mm_loadu_pd(&s2[L]));
        __m128d cov = _mm_sub_pd(_mm_loadu_pd(&w->fft[L]), _mm_div_pd(_mm_mul_pd(a1, b1), k));
        __m128d va = _mm_sub_pd(a2, _mm_div_pd(_mm_mul_pd(a1, a1), k));
        __m128d vb = _mm_sub_pd(b2, _mm_div_pd(_mm_mul_pd(b1, b1), k));
        __m128d ok = _mm_and_pd(_mm_cmpgt_pd(va, zero), _mm_cmpgt_pd(vb, zero));
        __m128d r = _mm_div_pd(cov, _mm_sqrt_pd(_mm_mul_pd(va, vb)));
        _mm_storeu_pd(&w->r[L], _mm_and_pd(ok, r));
    }
    return L;
}

/* Four lags at a time (AVX, where the CPU has it): 0.48x lags_sse2's
 * time (bench/README, "Twenty-fourth round"). */
__attribute__((target("avx"))) static size_t lags_avx(gm_period_work *w, size_t n, size_t L)
{
    const double *s1 = w->ps1, *s2 = w->ps2;
    const __m256d zero = _mm256_setzero_pd(), t1 = _mm256_set1_pd(s1[n]),
                  t2 = _mm256_set1_pd(s2[n]), four = _mm256_set1_pd(4.0);
    /* n - L - j for lanes j = 0..3, exact (integers below 2^53) */
    __m256d k = _mm256_set_pd((double)(n - L - 3), (double)(n - L - 2), (double)(n - L - 1),
                              (double)(n - L));
    for (; L + 3 <= n / 2; L += 4, k = _mm256_sub_pd(k, four)) {
        __m256d a1 = _mm256_loadu_pd(&s1[n - L - 3]), a2 = _mm256_loadu_pd(&s2[n - L - 3]);
        /* reversed, so that lane j holds lag L + j */
        a1 = _mm256_permute_pd(a1, 5);
        a1 = _mm256_permute2f128_pd(a1, a1, 1);
        a2 = _mm256_permute_pd(a2, 5);
        a2 = _mm256_permute2f128_pd(a2, a2, 1);
        __m256d b1 = _mm256_sub_pd(t1, _mm256_loadu_pd(&s1[L])),
                b2 = _mm256_sub_pd(t2, _mm256_loadu_pd(&s2[L]));
        __m256d cov =
            _mm256_sub_pd(_mm256_loadu_pd(&w->fft[L]), _mm256_div_pd(_mm256_mul_pd(a1, b1), k));
        __m256d va = _mm256_sub_pd(a2, _mm256_div_pd(_mm256_mul_pd(a1, a1), k));
        __m256d vb = _mm256_sub_pd(b2, _mm256_div_pd(_mm256_mul_pd(b1, b1), k));
        __m256d ok =
            _mm256_and_pd(_mm256_cmp_pd(va, zero, _CMP_GT_OQ), _mm256_cmp_pd(vb, zero, _CMP_GT_OQ));
        __m256d r = _mm256_div_pd(cov, _mm256_sqrt_pd(_mm256_mul_pd(va, vb)));
        _mm256_storeu_pd(&w->r[L], _mm256_and_pd(ok, r));
    }
    return L;
}
#endif

static int vector_max = 2; /* gm_period_vectors */

void gm_period_vectors(int max)
{
    vector_max = max;
}

/* r[L] = Pearson correlation of x[0..n-L) with x[L..n) (what
 * gsl_stats_correlation would give for each lag), from the FFT's cross sums
 * and prefix sums of v and v^2; m is the series' mean. */
static int lag_correlations(gm_period_work *w, const double *x, size_t n, double m)
{
    if (!cross_sums(w, x, n, m)) return 0;
    double *s1 = w->ps1, *s2 = w->ps2; /* prefix sums of v, v^2 */
    s1[0] = s2[0] = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i] - m;
        s1[i + 1] = s1[i] + v;
        s2[i + 1] = s2[i] + v * v;
    }
    size_t L = 1;
#ifdef __SSE2__
    if (vector_max >= 2 && __builtin_cpu_supports("avx"))
        L = lags_avx(w, n, L);
    else if (vector_max >= 1)
        L = lags_sse2(w, n, L);
#endif
    lags_scalar(w, n, L);
    return 1;
}

double gm_period_lag(gm_period_work *w, const double *x, size_t n, double *conf)
{
    size_t maxlag = n / 2;
    *conf = 0;
    if (n < 16 || n > GM_PERIOD_WIN) return 0;
    /* a constant series has no period (its variance is 0); the mean as a
     * plain sum: GSL's running mean (gsl_stats_mean) divides once per
     * sample, one division waiting for the last, and costs more here than
     * the FFT */
    double sum = 0;
    int constant = 1;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        constant &= x[i] == x[0];
    }
    if (constant) return 0;
    double m = sum / (double)n;
    if (!lag_correlations(w, x, n, m)) return 0;
    size_t l0 = 0;
    for (size_t L = 1; L <= maxlag && !l0; L++)
        if (w->r[L] < 0.2) l0 = L;
    if (!l0 || l0 >= maxlag) return 0;
    double best = -1;
    for (size_t L = l0; L <= maxlag; L++)
        best = w->r[L] > best ? w->r[L] : best;
    if (best < 0.5) return 0;
    for (size_t L = l0 + 1; L < maxlag; L++) {
        double r = w->r[L];
        if (r < 0.7 * best || r < w->r[L - 1] || r < w->r[L + 1]) continue;
        double den = w->r[L - 1] - 2 * r + w->r[L + 1], delta = 0;
        if (den < 0) delta = 0.5 * (w->r[L - 1] - w->r[L + 1]) / den;
        if (delta > 0.5 || delta < -0.5) delta = 0;
        *conf = r;
        return (double)L + delta;
    }
    return 0;
}
