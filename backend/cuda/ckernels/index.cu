/*
 * Data movement: strided copies (Transpose, Slice, Concat, Split,
 * Expand, Pad, Reshape), fills, and the indexed gathers and scatters.
 * Elements are moved as 1-, 2-, 4- or 8-byte words, so one kernel serves
 * every element type.
 */
#include "ts.h"

TS_DEVICE void ts_move(unsigned char *dst, long long di, const unsigned char *src, long long si, long long es) {
	switch (es) {
	case 8: ((long long *)dst)[di] = ((const long long *)src)[si]; break;
	case 4: ((int *)dst)[di] = ((const int *)src)[si]; break;
	case 2: ((short *)dst)[di] = ((const short *)src)[si]; break;
	default: dst[di] = src[si]; break;
	}
}

/*
 * ts_copy: for every index t over dims i[1..1+r) (r = i[0]),
 * dst[i[26] + off(t, dstrides)] = src[i[25] + off(t, sstrides)], with
 * sstrides at i[9..17), dstrides at i[17..25), offsets in elements and
 * i[27] the element size.
 */
TS_KERNEL(ts_copy) {
	int r = (int)a.i[0];
	const long long *dims = a.i + 1;
	TS_FOR(t) {
		long long s = a.i[25] + ts_offset(t, r, dims, a.i + 9);
		long long d = a.i[26] + ts_offset(t, r, dims, a.i + 17);
		ts_move((unsigned char *)a.p[0], d, (const unsigned char *)a.p[1], s, a.i[27]);
	}
}

/* ts_fill: dst[t] = the i[0]-byte word whose bits are i[1]. */
TS_KERNEL(ts_fill) {
	long long bits = a.i[1];
	TS_FOR(t) {
		ts_move((unsigned char *)a.p[0], t, (const unsigned char *)&bits, 0, a.i[0]);
	}
}

/* ts_index wraps a negative index and clamps a bad one to -1. */
TS_DEVICE long long ts_index(long long k, long long dim) {
	if (k < 0) k += dim;
	return k < 0 || k >= dim ? -1 : k;
}

/*
 * ts_gather (Gather): y[(o*m + j)*inner + k] = x[(o*dim + idx[j])*inner + k]
 * with i[0] the element size, i[1] dim (the gathered axis), i[2] inner,
 * i[3] m (the index count). An index out of range writes zero (the
 * reference kernel reports it; a kernel cannot).
 */
TS_KERNEL(ts_gather) {
	const long long *idx = (const long long *)a.p[2];
	long long es = a.i[0], dim = a.i[1], inner = a.i[2], m = a.i[3];
	TS_FOR(t) {
		long long k = t % inner, j = (t / inner) % m, o = t / (inner * m);
		long long q = ts_index(idx[j], dim);
		if (q < 0) {
			long long zero = 0;
			ts_move((unsigned char *)a.p[0], t, (const unsigned char *)&zero, 0, es);
			continue;
		}
		ts_move((unsigned char *)a.p[0], t, (const unsigned char *)a.p[1], (o * dim + q) * inner + k, es);
	}
}

/*
 * ts_gather_elements (GatherElements): y[t] = x at t's coordinate with
 * the axis coordinate replaced by idx[t]. i[0] rank, i[1] axis,
 * i[2..10) the index (and output) dims, i[10..18) x's strides,
 * i[18] x's axis dim, i[19] the element size.
 */
TS_KERNEL(ts_gather_elements) {
	const long long *idx = (const long long *)a.p[2];
	int r = (int)a.i[0], ax = (int)a.i[1];
	TS_FOR(t) {
		long long off = 0, rem = t;
		for (int d = r - 1; d >= 0; d--) {
			long long c = rem % a.i[2 + d];
			rem /= a.i[2 + d];
			if (d == ax) c = ts_index(idx[t], a.i[18]);
			off += c * a.i[10 + d];
		}
		if (ts_index(idx[t], a.i[18]) < 0) off = 0;
		ts_move((unsigned char *)a.p[0], t, (const unsigned char *)a.p[1], off, a.i[19]);
	}
}

/*
 * ts_scatter_elements (ScatterElements into y, already a copy of data):
 * y at t's coordinate, axis coordinate idx[t], gets upd[t] (i[20] 0:
 * replace, 1: add). Layout as ts_gather_elements with y's strides and
 * axis dim; float32 for add.
 */
TS_KERNEL(ts_scatter_elements) {
	const long long *idx = (const long long *)a.p[1];
	int r = (int)a.i[0], ax = (int)a.i[1];
	TS_FOR(t) {
		long long q = ts_index(idx[t], a.i[18]);
		if (q < 0) continue;
		long long off = 0, rem = t;
		for (int d = r - 1; d >= 0; d--) {
			long long c = rem % a.i[2 + d];
			rem /= a.i[2 + d];
			off += (d == ax ? q : c) * a.i[10 + d];
		}
		if (a.i[20] == 1)
			atomicAdd((float *)a.p[0] + off, ((const float *)a.p[2])[t]);
		else
			ts_move((unsigned char *)a.p[0], off, (const unsigned char *)a.p[2], t, a.i[19]);
	}
}

/*
 * ts_scatter_nd (ScatterND into y, already a copy of data): index tuple
 * j (i[0] = k integers at idx[j*k..]) addresses a slice of i[1]
 * elements; i[2..2+k) are data's leading dims, i[10..10+k) their
 * strides in elements; i[18] 0 replace, 1 add (float32); i[19] the
 * element size. Work items: tuples × slice size.
 */
TS_KERNEL(ts_scatter_nd) {
	const long long *idx = (const long long *)a.p[1];
	long long k = a.i[0], sl = a.i[1];
	TS_FOR(t) {
		long long j = t / sl, e = t % sl, off = 0;
		int bad = 0;
		for (long long d = 0; d < k; d++) {
			long long q = ts_index(idx[j * k + d], a.i[2 + d]);
			bad |= q < 0;
			off += q * a.i[10 + d];
		}
		if (bad) continue;
		if (a.i[18] == 1)
			atomicAdd((float *)a.p[0] + off + e, ((const float *)a.p[2])[t]);
		else
			ts_move((unsigned char *)a.p[0], off + e, (const unsigned char *)a.p[2], t, a.i[19]);
	}
}
