// Package measure times a training step on the bundled runtime and
// turns what it measured into a device profile (TSPLIT §V-A: profile
// every op on the device before planning).
//
// Run executes the unplanned step on the CPU device several times after
// a warm-up and keeps, per op key (profile.OpKey), the median of the
// kernel times it saw, the median gap between consecutive compute ops
// (the runtime's per-op cost, the profile's launch) and the device's
// own copy bandwidth. Build is a pure function of those measurements:
// the same measurements give the same profile, byte for byte. It fits
// the profile's roofline (throughput, small-kernel efficiency, memory
// bandwidth) to the measured ops so that ops the run did not see — the
// micro-ops of a split, the merges a plan adds — get an estimate on the
// same scale, and records per op type how far the roofline is from the
// measured times (profile.Profile.TypeScale).
//
// Emulate scales a built-in GPU profile's host link to the CPU device:
// the emulated link moves bytes as much slower than the GPU's as the
// CPU computes the step slower than the GPU's roofline says it would,
// so that the ratio of compute time to transfer time — what decides
// whether a swap hides behind compute — is the GPU's (docs/measured.md).
package measure
