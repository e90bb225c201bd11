/* period.c - see period.h. */
#include "period.h"

#include <gsl/gsl_fft_halfcomplex.h>
#include <gsl/gsl_fft_real.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>

#define FFT_N (2 * GM_PERIOD_WIN) /* zero-padded FFT length (a power of two) */

/* Lagged cross sums c[L] = sum_i v_i v_(i+L) of the mean-removed series,
 * L = 0..n/2, through GSL's FFT (zero-padded, so not circular): O(n log n)
 * instead of O(n^2), so a re-estimate every 16 samples stays cheap. */
static void cross_sums(gm_period_work *w, const double *x, size_t n, double m)
{
    double *v = w->fft;
    for (size_t i = 0; i < FFT_N; i++)
        v[i] = i < n ? x[i] - m : 0.0;
    gsl_fft_real_radix2_transform(v, 1, FFT_N);
    v[0] *= v[0]; /* power spectrum, in GSL's half-complex order */
    v[FFT_N / 2] *= v[FFT_N / 2];
    for (size_t k = 1; k < FFT_N / 2; k++) {
        v[k] = v[k] * v[k] + v[FFT_N - k] * v[FFT_N - k];
        v[FFT_N - k] = 0.0;
    }
    gsl_fft_halfcomplex_radix2_inverse(v, 1, FFT_N);
}

/* r[L] = Pearson correlation of x[0..n-L) with x[L..n) (what
 * gsl_stats_correlation would give for each lag), from the FFT's cross sums
 * and prefix sums of v and v^2; m is the series' mean. */
static void lag_correlations(gm_period_work *w, const double *x, size_t n, double m)
{
    cross_sums(w, x, n, m);
    double *s1 = w->ps1, *s2 = w->ps2; /* prefix sums of v, v^2 */
    s1[0] = s2[0] = 0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i] - m;
        s1[i + 1] = s1[i] + v;
        s2[i + 1] = s2[i] + v * v;
    }
    for (size_t L = 1; L <= n / 2; L++) {
        double k = (double)(n - L);
        double a1 = s1[n - L], a2 = s2[n - L];         /* v[0..n-L) */
        double b1 = s1[n] - s1[L], b2 = s2[n] - s2[L]; /* v[L..n)   */
        double cov = w->fft[L] - a1 * b1 / k;
        double va = a2 - a1 * a1 / k, vb = b2 - b1 * b1 / k;
        w->r[L] = va > 0 && vb > 0 ? cov / sqrt(va * vb) : 0;
    }
}

double gm_period_lag(gm_period_work *w, const double *x, size_t n, double *conf)
{
    size_t maxlag = n / 2;
    *conf = 0;
    if (n < 16 || n > GM_PERIOD_WIN) return 0;
    /* gsl_stats_variance is gsl_stats_variance_m of gsl_stats_mean: the mean
     * once (GSL's running mean divides per sample, one after another) */
    double m = gsl_stats_mean(x, 1, n);
    if (gsl_stats_variance_m(x, 1, n, m) <= 0) return 0;
    lag_correlations(w, x, n, m);
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
