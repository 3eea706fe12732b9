/*
 * all.cu: the one translation unit of the kernels. make ptx compiles it
 * to backend/cuda/ptx/kernels.ptx (one module for the device to load); the
 * host emulation (emu.c, this directory) includes it the same way.
 */
#include "elementwise.cu"
#include "index.cu"
#include "norm.cu"
#include "window.cu"
#include "dropout.cu"
