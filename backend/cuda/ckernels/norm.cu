/*
 * Reductions and normalisations. One thread owns one output row (a
 * reduced slice, a softmax column, a LayerNorm row, a BatchNorm channel)
 * and walks it serially, accumulating in double: no shared memory, so
 * the host emulation is exact, and the statistics round like the
 * reference kernels' float64 ones. The price is parallelism (one thread
 * per row, not per element): correct first, tuned later.
 */
#include "ts.h"

/*
 * ts_reduce_f32: y[t] = reduce over the reduced coordinates of x at
 * kept coordinate t. i[0] mode (0 sum, 1 mean, 2 max, 3 min, 4 sum of
 * squares), i[1] kept rank, i[2..10) kept dims, i[10..18) their strides
 * in x, i[18] reduced rank, i[19..27) reduced dims, i[27..35) strides.
 *
 * Split (i[35] = parts > 1, p[2] the device's scratch): a reduction of
 * few outputs over many elements (a batch norm's statistics: one output
 * per channel) would leave most of the GPU idle with one thread per
 * output. Work item t is then part t % parts of output t / parts: it
 * reduces the elements j ≡ part (mod parts), so neighbouring threads
 * read neighbouring elements, and writes its partial (the sum, or the
 * max/min) as a double to scratch[t]; ts_reduce_merge_f32 combines the
 * parts of each output in order. Fixed parts, fixed order: the result
 * does not depend on the schedule.
 */
TS_KERNEL(ts_reduce_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	double *part = (double *)a.p[2];
	long long cnt = 1;
	for (int d = 0; d < (int)a.i[18]; d++) cnt *= a.i[19 + d];
	long long parts = a.i[35] > 1 ? a.i[35] : 1;
	TS_FOR(t) {
		long long base = ts_offset(t / parts, (int)a.i[1], a.i + 2, a.i + 10);
		double acc = 0;
		float m = 0;
		for (long long j = t % parts; j < cnt; j += parts) {
			float v = x[base + ts_offset(j, (int)a.i[18], a.i + 19, a.i + 27)];
			if (j == t % parts) m = v;
			switch (a.i[0]) {
			case 2: if (v > m || v != v) m = v; break;
			case 3: if (v < m || v != v) m = v; break;
			case 4: acc += (double)v * v; break;
			default: acc += v; break;
			}
		}
		if (parts > 1) {
			part[t] = (a.i[0] == 2 || a.i[0] == 3) ? (double)m : acc;
			continue;
		}
		switch (a.i[0]) {
		case 1: y[t] = (float)(acc / (double)cnt); break;
		case 2:
		case 3: y[t] = m; break;
		default: y[t] = (float)acc; break;
		}
	}
}

/*
 * ts_reduce_merge_f32: y[t] = the i[1] partials scratch[t*i[1] ..] of a
 * split ts_reduce_f32, combined in order. i[0] mode as there, i[2] the
 * element count (the mean's divisor).
 */
TS_KERNEL(ts_reduce_merge_f32) {
	float *y = (float *)a.p[0];
	const double *part = (const double *)a.p[1];
	long long parts = a.i[1];
	TS_FOR(t) {
		const double *q = part + t * parts;
		double acc = 0, m = q[0];
		for (long long c = 0; c < parts; c++) {
			double v = q[c];
			switch (a.i[0]) {
			case 2: if (v > m || v != v) m = v; break;
			case 3: if (v < m || v != v) m = v; break;
			default: acc += v; break;
			}
		}
		switch (a.i[0]) {
		case 1: y[t] = (float)(acc / (double)a.i[2]); break;
		case 2:
		case 3: y[t] = (float)m; break;
		default: y[t] = (float)acc; break;
		}
	}
}

/*
 * ts_softmax_f32: x viewed as (outer, n, inner), normalised along n.
 * i[0] n, i[1] inner, i[2] 1 for LogSoftmax. Work items: outer*inner.
 */
TS_KERNEL(ts_softmax_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	long long n = a.i[0], inner = a.i[1];
	TS_FOR(t) {
		long long base = (t / inner) * n * inner + t % inner;
		float mx = -INFINITY;
		for (long long j = 0; j < n; j++) {
			float v = x[base + j * inner];
			if (v > mx) mx = v;
		}
		if (isinf(mx) && mx < 0) mx = 0;
		double sum = 0;
		if (a.i[2]) {
			for (long long j = 0; j < n; j++) sum += exp((double)(x[base + j * inner] - mx));
			float shift = mx + (float)log(sum);
			for (long long j = 0; j < n; j++) y[base + j * inner] = x[base + j * inner] - shift;
			continue;
		}
		for (long long j = 0; j < n; j++) {
			double e = exp((double)(x[base + j * inner] - mx));
			y[base + j * inner] = (float)e;
			sum += e;
		}
		float inv = (float)(1 / sum);
		for (long long j = 0; j < n; j++) y[base + j * inner] *= inv;
	}
}

/*
 * ts_layernorm_f32: each row of i[0] elements normalised: y = (x-mean)
 * * invstd * scale + bias; p[2] scale, p[3] bias (0: none; one value per
 * row element), p[4] mean and p[5] invstd outputs (0: none); f[0]
 * epsilon. Work items: rows.
 */
TS_KERNEL(ts_layernorm_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	const float *scale = (const float *)a.p[2], *bias = (const float *)a.p[3];
	long long inner = a.i[0];
	TS_FOR(t) {
		const float *row = x + t * inner;
		double s = 0, ss = 0;
		for (long long j = 0; j < inner; j++) s += row[j];
		double mean = s / (double)inner;
		for (long long j = 0; j < inner; j++) {
			double d = row[j] - mean;
			ss += d * d;
		}
		double inv = 1 / sqrt(ss / (double)inner + a.f[0]);
		if (a.p[4]) ((float *)a.p[4])[t] = (float)mean;
		if (a.p[5]) ((float *)a.p[5])[t] = (float)inv;
		float mf = (float)mean, invf = (float)inv;
		for (long long j = 0; j < inner; j++) {
			float v = (row[j] - mf) * invf;
			if (scale) v *= scale[j];
			if (bias) v += bias[j];
			y[t * inner + j] = v;
		}
	}
}

/*
 * ts_batchnorm_f32: channel t of x (N = i[0], C = i[1], i[2] elements
 * per plane). p[2..6) scale, bias, mean, var; p[6..10) running mean,
 * running var, saved mean, saved invstd outputs (0: none). i[3] 1 in
 * training mode (batch statistics, biased variance); f[0] epsilon,
 * f[1] momentum. Work items: C.
 *
 * Split (i[4] = parts > 1): the planes are large, so one thread per
 * channel would leave the GPU idle. ts_bn_partial has then written the
 * channel's partial sums to the scratch at address i[5] and its partial
 * sums of squared deviations at i[6] (parts per channel, in order);
 * this kernel merges them, writes the per-channel outputs, and instead
 * of y writes the channel's scale and shift (two doubles) to i[7], for
 * ts_bn_apply.
 */
TS_KERNEL(ts_batchnorm_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	long long n = a.i[0], ch = a.i[1], vol = a.i[2], parts = a.i[4];
	double eps = a.f[0], mom = a.f[1];
	TS_FOR(c) {
		double m = ((const float *)a.p[4])[c], v = ((const float *)a.p[5])[c];
		if (a.i[3]) {
			double s = 0, ss = 0, cnt = (double)(n * vol);
			if (parts > 1) {
				const double *ps = (const double *)a.i[5] + c * parts, *pss = (const double *)a.i[6] + c * parts;
				for (long long q = 0; q < parts; q++) s += ps[q];
				for (long long q = 0; q < parts; q++) ss += pss[q];
			} else {
				for (long long b = 0; b < n; b++)
					for (long long j = 0; j < vol; j++) s += x[(b * ch + c) * vol + j];
			}
			double bm = s / cnt;
			if (parts <= 1)
				for (long long b = 0; b < n; b++)
					for (long long j = 0; j < vol; j++) {
						double d = x[(b * ch + c) * vol + j] - bm;
						ss += d * d;
					}
			double bv = ss / cnt;
			if (a.p[6]) ((float *)a.p[6])[c] = (float)(m * mom + bm * (1 - mom));
			if (a.p[7]) ((float *)a.p[7])[c] = (float)(v * mom + bv * (1 - mom));
			if (a.p[8]) ((float *)a.p[8])[c] = (float)bm;
			if (a.p[9]) ((float *)a.p[9])[c] = (float)(1 / sqrt(bv + eps));
			m = bm;
			v = bv;
		}
		double sc = ((const float *)a.p[2])[c] / sqrt(v + eps);
		float af = (float)sc, bf = (float)(((const float *)a.p[3])[c] - m * sc);
		if (parts > 1) {
			double *ab = (double *)a.i[7];
			ab[2 * c] = af;
			ab[2 * c + 1] = bf;
			continue;
		}
		for (long long b = 0; b < n; b++)
			for (long long j = 0; j < vol; j++) {
				long long k = (b * ch + c) * vol + j;
				y[k] = x[k] * af + bf;
			}
	}
}

/*
 * ts_bn_partial: part t % parts of channel t / parts of x (N = i[0],
 * C = i[1], i[2] per plane, i[3] parts) sums the channel's elements
 * k ≡ part (mod parts), k over (batch, plane) in order, into the
 * double p[0][t]. With p[2] (the first pass's partials) it sums the
 * squared deviations from the channel's mean instead, the mean merged
 * from p[2] in the same order by every thread.
 */
TS_KERNEL(ts_bn_partial) {
	double *out = (double *)a.p[0];
	const float *x = (const float *)a.p[1];
	const double *sums = (const double *)a.p[2];
	long long n = a.i[0], ch = a.i[1], vol = a.i[2], parts = a.i[3];
	TS_FOR(t) {
		long long c = t / parts;
		double mean = 0;
		if (sums) {
			for (long long q = 0; q < parts; q++) mean += sums[c * parts + q];
			mean /= (double)(n * vol);
		}
		double acc = 0;
		for (long long k = t % parts; k < n * vol; k += parts) {
			double v = x[((k / vol) * ch + c) * vol + k % vol];
			acc += sums ? (v - mean) * (v - mean) : v;
		}
		out[t] = acc;
	}
}

/*
 * ts_bn_apply: y = x·scale + shift per channel, the pairs (two doubles
 * per channel, rounded to float as ts_batchnorm_f32 rounds them) at
 * p[2]; i[0] C, i[1] elements per plane. Work items: every element.
 */
TS_KERNEL(ts_bn_apply) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	const double *ab = (const double *)a.p[2];
	long long ch = a.i[0], vol = a.i[1];
	TS_FOR(k) {
		long long c = (k / vol) % ch;
		y[k] = x[k] * (float)ab[2 * c] + (float)ab[2 * c + 1];
	}
}
