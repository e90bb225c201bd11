/*
 * period.h - the period of a repeating series: the lag of its
 * autocorrelation peak. The predictive policy learns a training job's
 * iteration length with it (predictive.c), and study/leak.c finds
 * iterations in a trace that has no iteration markers.
 *
 * For each lag L the Pearson correlation r[L] of x[0..n-L) with x[L..n)
 * (what gsl_stats_correlation gives, computed for all lags at once from
 * FFTW's real FFT and prefix sums). Past the first lag where r falls below 0.2,
 * the smallest local maximum within 70 % of the highest one, refined by a
 * parabola through its neighbours, is the period; accepted when that
 * highest correlation is >= 0.5.
 */
#ifndef GM_PERIOD_H
#define GM_PERIOD_H

#include <stddef.h>

/* Most samples one call looks at. */
#define GM_PERIOD_WIN 1024

/* The zero-padded FFT's length: the cross sums of lags 0..n/2 of n <= WIN
 * samples wrap around no sample when it is at least n + n/2 (2^9 * 3 for
 * WIN 1024, which FFTW transforms in 0.54x the time of 2 * WIN: period.c). */
#define GM_PERIOD_FFT_N (3 * GM_PERIOD_WIN / 2)

/* Scratch space (about 48 KiB): keep one per user, never shared between threads. */
typedef struct gm_period_work {
    /* the zero-padded series, then its lagged cross sums; and its transform
     * (GM_PERIOD_FFT_N / 2 + 1 complex numbers). 16-byte aligned, as
     * malloc gives and FFTW's plans were made for (period.c) */
    _Alignas(16) double fft[GM_PERIOD_FFT_N];
    _Alignas(16) double spec[GM_PERIOD_FFT_N + 2];
    double r[GM_PERIOD_WIN / 2 + 1]; /* r[L], L = 1..n/2              */
    double ps1[GM_PERIOD_WIN + 1];   /* prefix sums of x - mean       */
    double ps2[GM_PERIOD_WIN + 1];   /* ... and of its square         */
} gm_period_work;

/* The period of x[0..n) in samples (fractional), 0 when there is none (n <
 * 16, a constant series, no peak, or FFTW could not make its plan: out of
 * memory); n is at most GM_PERIOD_WIN. *conf receives the correlation at
 * the chosen lag (0 when none). Thread-safe: the plans are made once per
 * process (period.c). */
double gm_period_lag(gm_period_work *w, const double *x, size_t n, double *conf);

/* The widest vectors the correlations may use: 0 scalar, 1 SSE2, 2 AVX
 * where the CPU has it (the default). Every choice gives the same bits
 * (period.c); tests hold each to the others. Not thread-safe: set it
 * before any gm_period_lag. */
void gm_period_vectors(int max);

#endif
