/* period.c - see period.h. */
#include "period.h"

#include <fftw3.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <math.h>
#include <pthread.h>
#include <string.h>

#define FFT_N (2 * GM_PERIOD_WIN) /* zero-padded FFT length (a power of two) */

/* FFTW's two in-place real transforms of FFT_N points, planned once per
 * process: FFTW's planner is not thread-safe, executing a plan is, on any
 * array of the planned one's alignment (fftw_execute_r2r; FFTW manual,
 * "New-array Execute Functions"). FFTW_ESTIMATE plans without timing runs
 * and FFTW_NO_SIMD keeps to the scalar codelets, so the plan and its
 * rounding are the same on every x86-64 CPU, run after run. */
static fftw_plan fwd, inv;
static int plan_align;
static pthread_once_t plan_once = PTHREAD_ONCE_INIT;

static void make_plans(void)
{
    double *a = fftw_alloc_real(FFT_N);
    if (!a) return;
    unsigned fl = FFTW_ESTIMATE | FFTW_NO_SIMD | FFTW_DESTROY_INPUT;
    fwd = fftw_plan_r2r_1d(FFT_N, a, a, FFTW_R2HC, fl);
    inv = fftw_plan_r2r_1d(FFT_N, a, a, FFTW_HC2R, fl);
    plan_align = fftw_alignment_of(a);
    fftw_free(a);
}

/* Lagged cross sums c[L] = sum_i v_i v_(i+L) of the mean-removed series,
 * L = 0..n/2, through an FFT (zero-padded, so not circular): O(n log n)
 * instead of O(n^2), so a re-estimate every 16 samples stays cheap. Returns
 * 0 when FFTW could not make its plans (out of memory). */
static int cross_sums(gm_period_work *w, const double *x, size_t n, double m)
{
    pthread_once(&plan_once, make_plans);
    if (!fwd || !inv) return 0;
    _Alignas(64) double tmp[FFT_N];
    double *v = fftw_alignment_of(w->fft) == plan_align ? w->fft : tmp;
    for (size_t i = 0; i < FFT_N; i++)
        v[i] = i < n ? x[i] - m : 0.0;
    fftw_execute_r2r(fwd, v, v);
    /* power spectrum, in the half-complex order (r0, r1, .., r(N/2), i(N/2-1),
     * .., i1), scaled by 1/FFT_N for the unnormalized inverse (a power of
     * two: exact) */
    const double s = 1.0 / FFT_N;
    v[0] = v[0] * v[0] * s;
    v[FFT_N / 2] = v[FFT_N / 2] * v[FFT_N / 2] * s;
    for (size_t k = 1; k < FFT_N / 2; k++) {
        v[k] = (v[k] * v[k] + v[FFT_N - k] * v[FFT_N - k]) * s;
        v[FFT_N - k] = 0.0;
    }
    fftw_execute_r2r(inv, v, v);
    if (v != w->fft) memcpy(w->fft, v, sizeof tmp);
    return 1;
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
    /* Two lags at a time (SSE2, which every x86-64 has): the same
     * operations in the same order as the loop below, and IEEE division
     * and square root round the same in a vector register, so r is the
     * same to the bit (test_period holds the two to each other). A lag
     * whose variance is not positive takes the root of a product that may
     * be negative (a NaN, no trap) and is masked to 0, as below. The
     * predictive policy's time 0.995x (bench/README, "Twenty-third
     * round"). */
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
#endif
    for (; L <= n / 2; L++) {
        double k = (double)(n - L);
        double a1 = s1[n - L], a2 = s2[n - L];         /* v[0..n-L) */
        double b1 = s1[n] - s1[L], b2 = s2[n] - s2[L]; /* v[L..n)   */
        double cov = w->fft[L] - a1 * b1 / k;
        double va = a2 - a1 * a1 / k, vb = b2 - b1 * b1 / k;
        w->r[L] = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0;
    }
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
