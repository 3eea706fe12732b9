/*
 * Training-mode Dropout drawing exactly the reference kernel's masks
 * (kernels/misc_dropout.go): elements come in blocks of 2^14, block b
 * draws from math/rand/v2's PCG (128-bit LCG, DXSM output) seeded with
 * (splitmix(seed + b*golden), step), each 64-bit draw deciding two
 * elements (low half first); an element is kept when its 32-bit draw is
 * >= the threshold, and scaled by 1/(1 - ratio). One thread per block:
 * the stream is sequential within a block.
 *
 * i[0] the op's seed, i[1] the step's stream selector (both as uint64
 * bits), i[2] the threshold, i[3] the element count; f[0] the scale;
 * p[2] the bool mask output (0: none). Work items: blocks.
 */
#include "ts.h"

#define TS_DROP_BLOCK 16384

TS_DEVICE unsigned long long ts_mulhi(unsigned long long a, unsigned long long b) {
#ifdef __CUDACC__
	return __umul64hi(a, b);
#else
	return (unsigned long long)(((unsigned __int128)a * b) >> 64);
#endif
}

TS_DEVICE unsigned long long ts_splitmix(unsigned long long x) {
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

TS_KERNEL(ts_dropout_f32) {
	float *y = (float *)a.p[0];
	const float *x = (const float *)a.p[1];
	unsigned char *mask = (unsigned char *)a.p[2];
	unsigned long long seed = (unsigned long long)a.i[0];
	unsigned int thr = (unsigned int)a.i[2];
	long long total = a.i[3];
	float scale = (float)a.f[0];
	TS_FOR(b) {
		/* rand.NewPCG(seed1, seed2): hi = seed1, lo = seed2 */
		unsigned long long hi = ts_splitmix(seed + (unsigned long long)b * 0x9e3779b97f4a7c15ULL);
		unsigned long long lo = (unsigned long long)a.i[1];
		long long i0 = b * TS_DROP_BLOCK, i1 = i0 + TS_DROP_BLOCK < total ? i0 + TS_DROP_BLOCK : total;
		for (long long i = i0; i < i1; i += 2) {
			const unsigned long long mulHi = 2549297995355413924ULL, mulLo = 4865540595714422341ULL;
			const unsigned long long incHi = 6364136223846793005ULL, incLo = 1442695040888963407ULL;
			unsigned long long nhi = ts_mulhi(lo, mulLo) + hi * mulLo + lo * mulHi;
			unsigned long long nlo = lo * mulLo;
			unsigned long long sum = nlo + incLo;
			nhi += incHi + (sum < nlo);
			lo = sum;
			hi = nhi;
			unsigned long long u = hi;
			u ^= u >> 32;
			u *= 0xda942042e4dd58b5ULL;
			u ^= u >> 48;
			u *= (lo | 1);
			for (int k = 0; k < 2 && i + k < i1; k++) {
				unsigned int r = k == 0 ? (unsigned int)u : (unsigned int)(u >> 32);
				int keep = r >= thr;
				y[i + k] = keep ? x[i + k] * scale : 0.0f;
				if (mask) mask[i + k] = (unsigned char)keep;
			}
		}
	}
}
