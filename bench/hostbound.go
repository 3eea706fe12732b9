package bench

import (
	"fmt"

	"github.com/tsplit/tsplit/internal/units"
)

// stateCopies is how many parameter-sized tensors of training state the
// step keeps per parameter: the parameter and its gradient, and the
// optimizer's state (momentum one, Adam two, SGD none).
func stateCopies(optimizer string) int64 {
	switch optimizer {
	case "momentum":
		return 3
	case "adam":
		return 4
	}
	return 2
}

// stateBytes is what model m's parameters, gradients and optimizer state
// take at scale k, in fp32.
func stateBytes(r *Results, m Model, k int64) (int64, error) {
	n, err := paramCount(r, m, k)
	if err != nil {
		return 0, err
	}
	return 4 * stateCopies(r.Config.Optimizer) * n, nil
}

// hostBoundOf is Table V's host-memory bound for model m (issue 14
// must-show 1): the largest k (up to the search's cap) at which the
// step's parameters, gradients and optimizer state alone fit the
// profile's host memory; 0 where not even k = 1 does. It is the
// reference a plan that keeps the state on the host (--offload) is
// measured against, not a limit: a plan that updates each parameter
// soon after its gradient is complete never holds every gradient at
// once. The state grows with k (as k² for every weight matrix), so
// bisection finds it.
func hostBoundOf(r *Results, m Model) (int64, error) {
	fits := func(k int64) (bool, error) {
		b, err := stateBytes(r, m, k)
		return err == nil && b <= r.Profile.HostMemory, err
	}
	// Doubling, then bisection: the state passes the host memory long
	// before the zoo's largest configuration.
	lim := r.Config.widthLimit()
	lo, hi := int64(0), int64(1)
	for {
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		if hi >= lim {
			return lim, nil
		}
		lo, hi = hi, min(2*hi, lim)
	}
	for hi-lo > 1 { // fits(lo) (or lo = 0), !fits(hi)
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// hostBound is model i's host bound (0: not computed).
func (r *Results) hostBound(i int) int64 {
	if i < len(r.HostBound) {
		return r.HostBound[i]
	}
	return 0
}

// hostBoundNote explains the host bound column of Table V.
func hostBoundNote(r *Results) string {
	s := fmt.Sprintf("Host bound k: the largest k at which the step's parameters, gradients and optimizer state alone "+
		"(%d fp32 tensors per parameter with %s) fill the %s of host memory: the training state a step with that "+
		"state on the host holds between two steps (parameters and optimizer state) or at the end of the backward pass "+
		"(the gradients too, where every update follows the whole backward pass).", stateCopies(r.Config.Optimizer),
		r.Config.Optimizer, units.Bytes(r.Profile.HostMemory))
	if r.Config.Offload {
		return s + " tsplit and tsplit-nosplit may keep the parameters and optimizer state on the host where they do not " +
			"fit on the device (`--offload`, docs/offload.md); the other policies keep them on the device."
	}
	return s + " Every policy here keeps the parameters and optimizer state on the device (without `--offload`)."
}
