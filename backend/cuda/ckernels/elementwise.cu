/*
 * Elementwise kernels. Operand layout (shared by the broadcasting ones):
 * i[0] the operation code, i[1] the output rank r, i[2..10) the output
 * dims, then one stride array of TS_MAXR per input (0 where the input
 * broadcasts). The codes are those of package backend/cuda/launch.
 */
#include "ts.h"

#define TS_DIMS (a.i + 2)
#define TS_STR(k) (a.i + 10 + (k) * TS_MAXR)

/* ts_binary_f32: y = a op b over float32, broadcasting. */
TS_KERNEL(ts_binary_f32) {
	float *y = (float *)a.p[0];
	const float *x0 = (const float *)a.p[1];
	const float *x1 = (const float *)a.p[2];
	int r = (int)a.i[1];
	TS_FOR(t) {
		float u = x0[ts_offset(t, r, TS_DIMS, TS_STR(0))];
		float v = x1[ts_offset(t, r, TS_DIMS, TS_STR(1))];
		float o;
		switch (a.i[0]) {
		case 0: o = u + v; break;
		case 1: o = u - v; break;
		case 2: o = u * v; break;
		case 3: o = u / v; break;
		case 4: o = u > v || u != u ? u : v; break; /* Max: NaN wins */
		case 5: o = u < v || u != u ? u : v; break; /* Min */
		default: o = (float)pow((double)u, (double)v); break;
		}
		y[t] = o;
	}
}

/* ts_binary_i64: y = a op b over int64 (division truncates, as Go's). */
TS_KERNEL(ts_binary_i64) {
	long long *y = (long long *)a.p[0];
	const long long *x0 = (const long long *)a.p[1];
	const long long *x1 = (const long long *)a.p[2];
	int r = (int)a.i[1];
	TS_FOR(t) {
		long long u = x0[ts_offset(t, r, TS_DIMS, TS_STR(0))];
		long long v = x1[ts_offset(t, r, TS_DIMS, TS_STR(1))];
		long long o;
		switch (a.i[0]) {
		case 0: o = u + v; break;
		case 1: o = u - v; break;
		case 2: o = u * v; break;
		case 3: o = v == 0 ? 0 : u / v; break;
		case 4: o = u > v ? u : v; break;
		default: o = u < v ? u : v; break;
		}
		y[t] = o;
	}
}

/*
 * ts_compare: bool y = a op b; i[26] is the operand type (0 float32,
 * 1 int64). Codes: 0 Equal, 1 Greater, 2 GreaterOrEqual, 3 Less,
 * 4 LessOrEqual.
 */
TS_KERNEL(ts_compare) {
	unsigned char *y = (unsigned char *)a.p[0];
	int r = (int)a.i[1];
	TS_FOR(t) {
		long long o0 = ts_offset(t, r, TS_DIMS, TS_STR(0));
		long long o1 = ts_offset(t, r, TS_DIMS, TS_STR(1));
		int lt, eq;
		if (a.i[26] == 0) {
			float u = ((const float *)a.p[1])[o0], v = ((const float *)a.p[2])[o1];
			lt = u < v;
			eq = u == v;
			if (u != u || v != v) { /* NaN compares false both ways */
				y[t] = 0;
				continue;
			}
		} else {
			long long u = ((const long long *)a.p[1])[o0], v = ((const long long *)a.p[2])[o1];
			lt = u < v;
			eq = u == v;
		}
		int o;
		switch (a.i[0]) {
		case 0: o = eq; break;
		case 1: o = !lt && !eq; break;
		case 2: o = !lt; break;
		case 3: o = lt; break;
		default: o = lt || eq; break;
		}
		y[t] = (unsigned char)o;
	}
}

/* ts_logic: bool y = a op b; 0 And, 1 Or, 2 Xor. */
TS_KERNEL(ts_logic) {
	unsigned char *y = (unsigned char *)a.p[0];
	const unsigned char *x0 = (const unsigned char *)a.p[1];
	const unsigned char *x1 = (const unsigned char *)a.p[2];
	int r = (int)a.i[1];
	TS_FOR(t) {
		int u = x0[ts_offset(t, r, TS_DIMS, TS_STR(0))] != 0;
		int v = x1[ts_offset(t, r, TS_DIMS, TS_STR(1))] != 0;
		int o = a.i[0] == 0 ? (u && v) : a.i[0] == 1 ? (u || v) : (u != v);
		y[t] = (unsigned char)o;
	}
}

/*
 * ts_where: y = cond ? x : z, broadcasting all three; i[34] is the
 * element size of x, z and y in bytes (1, 4 or 8).
 */
TS_KERNEL(ts_where) {
	const unsigned char *c = (const unsigned char *)a.p[1];
	int r = (int)a.i[1];
	long long es = a.i[34];
	TS_FOR(t) {
		int k = c[ts_offset(t, r, TS_DIMS, TS_STR(0))] != 0;
		long long off = k ? ts_offset(t, r, TS_DIMS, TS_STR(1)) : ts_offset(t, r, TS_DIMS, TS_STR(2));
		const unsigned char *src = (const unsigned char *)(k ? a.p[2] : a.p[3]);
		unsigned char *dst = (unsigned char *)a.p[0];
		switch (es) {
		case 8: ((long long *)dst)[t] = ((const long long *)src)[off]; break;
		case 4: ((int *)dst)[t] = ((const int *)src)[off]; break;
		default: dst[t] = src[off]; break;
		}
	}
}

/*
 * ts_unary_f32: y = f(x) over float32, same shape. Codes: 0 Identity,
 * 1 Relu, 2 Neg, 3 Exp, 4 Log, 5 Sqrt, 6 Reciprocal, 7 Erf, 8 Tanh,
 * 9 Sigmoid, 10 Abs, 11 Clip (bounds f[0], f[1], or the scalars at
 * p[2], p[3] when given), 12 LeakyRelu (alpha f[0]), 13 HardSigmoid
 * (max(0, min(1, f[0]·x + f[1]))), 14 HardSwish (x · HardSigmoid with
 * 1/6 and 1/2: MobileNetV3's activation).
 */
TS_KERNEL(ts_unary_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	float lo = (float)a.f[0], hi = (float)a.f[1];
	if (a.i[0] == 14) lo = 1.0f / 6, hi = 0.5f;
	if (a.i[0] == 11) {
		if (a.p[2]) lo = *(const float *)a.p[2];
		if (a.p[3]) hi = *(const float *)a.p[3];
	}
	TS_FOR(t) {
		float v = x[t], o;
		switch (a.i[0]) {
		case 0: o = v; break;
		case 1: o = v > 0 ? v : (v != v ? v : 0.0f); break;
		case 2: o = -v; break;
		case 3: o = expf(v); break;
		case 4: o = logf(v); break;
		case 5: o = sqrtf(v); break;
		case 6: o = 1.0f / v; break;
		case 7: o = erff(v); break;
		case 8: o = tanhf(v); break;
		case 9: o = (float)(1.0 / (1.0 + exp(-(double)v))); break;
		case 10: o = fabsf(v); break;
		case 11: o = v < lo ? lo : (v > hi ? hi : v); break;
		case 13: o = fminf(1.0f, fmaxf(0.0f, lo * v + hi)); break;
		case 14: o = v * fminf(1.0f, fmaxf(0.0f, lo * v + hi)); break;
		default: o = v < 0 ? v * lo : v; break;
		}
		y[t] = o;
	}
}

/*
 * ts_cast: y = x converted; i[0] the source type, i[1] the destination
 * (0 float32, 1 int64, 2 bool, 3 float64, 4 int32). Float to integer
 * truncates toward zero; anything to bool is x != 0.
 */
TS_KERNEL(ts_cast) {
	TS_FOR(t) {
		double v;
		long long iv = 0;
		int isInt = 0;
		switch (a.i[0]) {
		case 0: v = ((const float *)a.p[1])[t]; break;
		case 1: iv = ((const long long *)a.p[1])[t]; v = (double)iv; isInt = 1; break;
		case 2: iv = ((const unsigned char *)a.p[1])[t] != 0; v = (double)iv; isInt = 1; break;
		case 3: v = ((const double *)a.p[1])[t]; break;
		default: iv = ((const int *)a.p[1])[t]; v = (double)iv; isInt = 1; break;
		}
		switch (a.i[1]) {
		case 0: ((float *)a.p[0])[t] = isInt ? (float)iv : (float)v; break;
		case 1: ((long long *)a.p[0])[t] = isInt ? iv : (long long)v; break;
		case 2: ((unsigned char *)a.p[0])[t] = isInt ? iv != 0 : v != 0; break;
		case 3: ((double *)a.p[0])[t] = v; break;
		default: ((int *)a.p[0])[t] = isInt ? (int)iv : (int)v; break;
		}
	}
}
