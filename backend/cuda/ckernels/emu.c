// The CUDA kernels compiled for the host: all.cu under the grid
// emulation of ts.h, plus a launcher that runs a kernel over its grid
// the way a GPU would (every block, every thread), in order.
#include <string.h>
#include "all.cu"
#include "emu.h"

typedef void (*ts_fn)(ts_args);

static const struct {
	const char *name;
	ts_fn fn;
} ts_table[] = {
#define K(n) {#n, n},
#include "list.h"
#undef K
};

int ts_host_kernels(void) { return (int)(sizeof ts_table / sizeof ts_table[0]); }

const char *ts_host_kernel_name(int i) { return ts_table[i].name; }

int ts_host_launch(const char *name, const ts_args *a, unsigned grid, unsigned block) {
	for (size_t k = 0; k < sizeof ts_table / sizeof ts_table[0]; k++) {
		if (strcmp(ts_table[k].name, name) != 0) continue;
		gridDim.x = grid;
		gridDim.y = gridDim.z = 1;
		blockDim.x = block;
		blockDim.y = blockDim.z = 1;
		for (unsigned b = 0; b < grid; b++)
			for (unsigned t = 0; t < block; t++) {
				blockIdx.x = b;
				threadIdx.x = t;
				ts_table[k].fn(*a);
			}
		return 0;
	}
	return -1;
}
