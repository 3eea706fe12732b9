/*
 * Sliding-window kernels: pooling, direct convolution and its
 * transpose, and im2col for convolution through GEMM. Every window op
 * sees up to three spatial dims (D, H, W; a 2-D op has D = 1, a 1-D op
 * D = H = 1). Geometry layout: i[1..4) input dims, i[4..7) output dims,
 * i[7..10) kernel, i[10..13) strides, i[13..16) begin pads,
 * i[16..19) end pads, i[19..22) dilations.
 */
#include "ts.h"

#define G_IN(k) a.i[1 + (k)]
#define G_OUT(k) a.i[4 + (k)]
#define G_K(k) a.i[7 + (k)]
#define G_S(k) a.i[10 + (k)]
#define G_PB(k) a.i[13 + (k)]
#define G_PE(k) a.i[16 + (k)]
#define G_D(k) a.i[19 + (k)]
#define G_INVOL (G_IN(0) * G_IN(1) * G_IN(2))
#define G_OUTVOL (G_OUT(0) * G_OUT(1) * G_OUT(2))
#define G_KVOL (G_K(0) * G_K(1) * G_K(2))

/*
 * ts_pool_f32: i[0] mode (0 max, 1 average), i[22] count_include_pad.
 * p[2] the MaxPool Indices output (int64, flat over the whole input;
 * 0: none). Work items: planes (N*C) × output volume.
 */
TS_KERNEL(ts_pool_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	long long inVol = G_INVOL, outVol = G_OUTVOL;
	TS_FOR(t) {
		long long pl = t / outVol, o = t % outVol;
		long long oc[3] = {o / (G_OUT(1) * G_OUT(2)), (o / G_OUT(2)) % G_OUT(1), o % G_OUT(2)};
		const float *xp = x + pl * inVol;
		float mx = -INFINITY;
		long long arg = -1, cnt = 0, padCnt = 1;
		double sum = 0;
		for (int k = 0; k < 3; k++) {
			/* taps inside the padded input, for count_include_pad */
			long long n = 0;
			for (long long q = 0; q < G_K(k); q++) {
				long long p = oc[k] * G_S(k) - G_PB(k) + q * G_D(k);
				if (p >= -G_PB(k) && p < G_IN(k) + G_PE(k)) n++;
			}
			padCnt *= n;
		}
		for (long long kd = 0; kd < G_K(0); kd++) {
			long long id = oc[0] * G_S(0) - G_PB(0) + kd * G_D(0);
			if (id < 0 || id >= G_IN(0)) continue;
			for (long long kh = 0; kh < G_K(1); kh++) {
				long long ih = oc[1] * G_S(1) - G_PB(1) + kh * G_D(1);
				if (ih < 0 || ih >= G_IN(1)) continue;
				for (long long kw = 0; kw < G_K(2); kw++) {
					long long iw = oc[2] * G_S(2) - G_PB(2) + kw * G_D(2);
					if (iw < 0 || iw >= G_IN(2)) continue;
					long long k = (id * G_IN(1) + ih) * G_IN(2) + iw;
					float v = xp[k];
					if (arg < 0 || v > mx) {
						mx = v;
						arg = k;
					}
					sum += v;
					cnt++;
				}
			}
		}
		if (a.i[0] == 0) {
			y[t] = mx;
			if (a.p[2]) ((long long *)a.p[2])[t] = pl * inVol + arg;
		} else {
			long long div = a.i[22] ? padCnt : cnt;
			y[t] = div > 0 ? (float)(sum / (double)div) : 0.0f;
		}
	}
}

/*
 * ts_conv_f32: direct convolution, one thread per output element:
 * y[n,m,o] = bias[m] + sum over the group's channels and taps of
 * x * w. i[24] N, i[25] C, i[26] M, i[27] group; p[2] W (M, C/group,
 * k...), p[3] bias (0: none). Serves the depthwise case and any
 * convolution whose im2col block does not fit the scratch.
 *
 * Split (i[28] = parts > 1, p[4] the device's scratch): few outputs
 * over a long sum (a depthwise convolution's weight gradient: the kernel
 * is the output gradient, a whole map per channel). Work item t is part
 * t % parts of output t / parts: the terms r ≡ part (mod parts) of the
 * sum over r = (channel, tap), written as a double to p[4][t] (part 0
 * adds the bias); ts_reduce_merge_f32 sums the parts in order.
 */
TS_KERNEL(ts_conv_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1], *w = (const float *)a.p[2], *bias = (const float *)a.p[3];
	double *part = (double *)a.p[4];
	long long C = a.i[25], M = a.i[26], grp = a.i[27], cg = C / grp, mg = M / grp;
	long long inVol = G_INVOL, outVol = G_OUTVOL, kVol = G_KVOL;
	long long parts = a.i[28] > 1 ? a.i[28] : 1;
	TS_FOR(t) {
		long long u = t / parts, p0 = t % parts;
		long long o = u % outVol, m = (u / outVol) % M, n = u / (outVol * M), g = m / mg;
		long long oc[3] = {o / (G_OUT(1) * G_OUT(2)), (o / G_OUT(2)) % G_OUT(1), o % G_OUT(2)};
		double acc = bias && p0 == 0 ? bias[m] : 0;
		if (parts > 1) {
			for (long long r = p0; r < cg * kVol; r += parts) {
				long long c = r / kVol, kt = r % kVol;
				long long kd = kt / (G_K(1) * G_K(2)), kh = (kt / G_K(2)) % G_K(1), kw = kt % G_K(2);
				long long id = oc[0] * G_S(0) - G_PB(0) + kd * G_D(0);
				long long ih = oc[1] * G_S(1) - G_PB(1) + kh * G_D(1);
				long long iw = oc[2] * G_S(2) - G_PB(2) + kw * G_D(2);
				if (id < 0 || id >= G_IN(0) || ih < 0 || ih >= G_IN(1) || iw < 0 || iw >= G_IN(2)) continue;
				acc += (double)x[(n * C + g * cg + c) * inVol + (id * G_IN(1) + ih) * G_IN(2) + iw] *
				       w[(m * cg + c) * kVol + kt];
			}
			part[t] = acc;
			continue;
		}
		for (long long c = 0; c < cg; c++) {
			const float *xp = x + (n * C + g * cg + c) * inVol;
			const float *wp = w + (m * cg + c) * kVol;
			for (long long kd = 0; kd < G_K(0); kd++) {
				long long id = oc[0] * G_S(0) - G_PB(0) + kd * G_D(0);
				if (id < 0 || id >= G_IN(0)) continue;
				for (long long kh = 0; kh < G_K(1); kh++) {
					long long ih = oc[1] * G_S(1) - G_PB(1) + kh * G_D(1);
					if (ih < 0 || ih >= G_IN(1)) continue;
					for (long long kw = 0; kw < G_K(2); kw++) {
						long long iw = oc[2] * G_S(2) - G_PB(2) + kw * G_D(2);
						if (iw < 0 || iw >= G_IN(2)) continue;
						acc += (double)xp[(id * G_IN(1) + ih) * G_IN(2) + iw] *
						       wp[(kd * G_K(1) + kh) * G_K(2) + kw];
					}
				}
			}
		}
		y[t] = (float)acc;
	}
}

/*
 * ts_tconv_src is the input position (flat over the input plane) that
 * tap kt (flat over the kernel) of a transposed convolution brings to
 * output position oc, or -1 when none does: i*s - pb + k*d = o per dim.
 * g is a kernel's integer parameters (the window layout above).
 */
TS_DEVICE long long ts_tconv_src(const long long *g, const long long oc[3], long long kt) {
	long long k[3] = {kt / (g[8] * g[9]), (kt / g[9]) % g[8], kt % g[9]};
	long long src = 0;
	for (int d = 0; d < 3; d++) {
		long long p = oc[d] + g[13 + d] - k[d] * g[19 + d];
		if (p < 0 || p % g[10 + d] || p / g[10 + d] >= g[1 + d]) return -1;
		src = src * g[1 + d] + p / g[10 + d];
	}
	return src;
}

/*
 * ts_conv_transpose_f32: direct transposed convolution, one thread per
 * output element (a gather, so no atomics): y[n,m,o] = bias[m] + sum of
 * x[n,c,i] * w[c, m mod M/group, k] over the group's input channels c
 * and the taps k with i*s - pb + k*d = o. Geometry: "in" is X's spatial
 * dims, "out" is Y's. i[24] N, i[25] C (X's channels), i[26] M, i[27]
 * group; p[2] W (C, M/group, k...), p[3] bias.
 */
TS_KERNEL(ts_conv_transpose_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1], *w = (const float *)a.p[2], *bias = (const float *)a.p[3];
	long long C = a.i[25], M = a.i[26], grp = a.i[27], cg = C / grp, mg = M / grp;
	long long inVol = G_INVOL, outVol = G_OUTVOL, kVol = G_KVOL;
	TS_FOR(t) {
		long long o = t % outVol, m = (t / outVol) % M, n = t / (outVol * M), g = m / mg;
		long long oc[3] = {o / (G_OUT(1) * G_OUT(2)), (o / G_OUT(2)) % G_OUT(1), o % G_OUT(2)};
		double acc = bias ? bias[m] : 0;
		for (long long c = 0; c < cg; c++) {
			const float *xp = x + (n * C + g * cg + c) * inVol;
			const float *wp = w + ((g * cg + c) * mg + m % mg) * kVol;
			for (long long kt = 0; kt < kVol; kt++) {
				long long src = ts_tconv_src(a.i, oc, kt);
				if (src >= 0) acc += (double)xp[src] * wp[kt];
			}
		}
		y[t] = (float)acc;
	}
}

/*
 * ts_im2col_f32: rows [i[28], i[28]+i[29]) of the column matrix of one
 * image's group (p[1] points at its first channel): row r = c*kVol +
 * tap, column = output position; zero where the tap falls in padding.
 * Work items: rows × output volume, or for several images (one after
 * the other in p[0], i[31] elements apart in x) a multiple of it.
 */
TS_KERNEL(ts_im2col_f32) {
	float *col = (float *)a.p[0];
	long long inVol = G_INVOL, outVol = G_OUTVOL, kVol = G_KVOL, per = a.i[29] * outVol;
	TS_FOR(t) {
		const float *x = (const float *)a.p[1] + (t / per) * a.i[31];
		long long o = t % outVol, r = a.i[28] + (t % per) / outVol;
		long long c = r / kVol, k = r % kVol;
		long long kc[3] = {k / (G_K(1) * G_K(2)), (k / G_K(2)) % G_K(1), k % G_K(2)};
		long long oc[3] = {o / (G_OUT(1) * G_OUT(2)), (o / G_OUT(2)) % G_OUT(1), o % G_OUT(2)};
		long long off = 0;
		int in = 1;
		for (int d = 0; d < 3; d++) {
			long long p = oc[d] * G_S(d) - G_PB(d) + kc[d] * G_D(d);
			in &= p >= 0 && p < G_IN(d);
			off = off * G_IN(d) + p;
		}
		col[t] = in ? x[c * inVol + off] : 0.0f;
	}
}

/* ts_bias_f32: y[(n*M + m)*vol + j] += b[m]; i[0] M, i[1] vol. */
TS_KERNEL(ts_bias_f32) {
	float *y = (float *)a.p[0];
	const float *b = (const float *)a.p[1];
	TS_FOR(t) { y[t] += b[(t / a.i[1]) % a.i[0]]; }
}

/*
 * ts_col2im_f32: the gather half of a ConvTranspose computed as a GEMM
 * (launch's planConvTranspose): p[1] holds, for i[25] images and i[26]
 * output channels, the columns cols[(image, channel, tap), input
 * position] = sum over input channels of W·x. Each output element sums
 * the columns of its taps (i*s - pb + k*d = o) in tap order, plus the
 * bias p[3] (0: none), so no two threads write one element. p[0] is the
 * first image's first channel of the block in y; i[24] is y's channel
 * count (the image stride is i[24] planes). Work items: images ×
 * channels × output plane.
 */
TS_KERNEL(ts_col2im_f32) {
	float *y = (float *)a.p[0];
	const float *cols = (const float *)a.p[1], *bias = (const float *)a.p[3];
	long long M = a.i[24], mb = a.i[26];
	long long inVol = G_INVOL, outVol = G_OUTVOL, kVol = G_KVOL;
	TS_FOR(t) {
		long long o = t % outVol, m = (t / outVol) % mb, j = t / (outVol * mb);
		long long oc[3] = {o / (G_OUT(1) * G_OUT(2)), (o / G_OUT(2)) % G_OUT(1), o % G_OUT(2)};
		const float *cp = cols + (j * mb + m) * kVol * inVol;
		double acc = bias ? bias[m] : 0;
		for (long long kt = 0; kt < kVol; kt++) {
			long long src = ts_tconv_src(a.i, oc, kt);
			if (src >= 0) acc += cp[kt * inVol + src];
		}
		y[(j * M + m) * outVol + o] = (float)acc;
	}
}
