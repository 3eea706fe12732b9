// Package plantest holds what the tests of the compiler passes and of
// the memory policies share: small deterministic weights and training
// steps, zoo steps, the memory model's peak, and running a step —
// planned, at its static layout, or unplanned — on the capped CPU
// device. Passes' tests check the mechanism (insertion, layout) and
// policies' tests the plans; both run what they built the same way.
package plantest
