#include "ts.h"
int ts_host_kernels(void);
const char *ts_host_kernel_name(int i);
int ts_host_launch(const char *name, const ts_args *a, unsigned grid, unsigned block);
