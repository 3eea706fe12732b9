package passes

import "github.com/tsplit/tsplit/profile"

// Options configure the planning pipeline.
type Options struct {
	// Budget is the device memory budget in bytes (0: the profile's).
	Budget int64
	// Profile is the device; nil means titan-rtx.
	Profile *profile.Profile
	// Policy names the memory policy (see Policies); "" is "tsplit".
	Policy string
	// NoSwap and NoRecompute restrict the tsplit planner's options.
	NoSwap, NoRecompute bool
	// PolicyParams are named parameters of the policy, as text (tflms:
	// n_tensors, lb, ub, ctrld_strategy, fuse_swapins). A policy rejects
	// names it does not know.
	PolicyParams map[string]string
}
