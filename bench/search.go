package bench

// Search is the result of one bisection: the largest value that passes
// the test, with the probes on either side of the boundary.
type Search struct {
	// Max is the largest passing value (0: even 1 fails).
	Max int64
	// Capped says Max is the search cap, not a boundary found.
	Capped bool
	// At is the probe at Max (nil when Max is 0); Stop the failing probe
	// at the boundary, Max+1 (nil when Capped): its error or its
	// throughput says why the search stopped there.
	At, Stop *Probe
}

// maxPassing finds the largest x in [1, limit] for which test passes,
// assuming test passes up to a point and fails after it: exponential
// search (1, 2, 4, …) to the first failure, then binary search between
// the last pass and that failure. The probes it asks for depend only on
// the answers, so the result is deterministic.
func maxPassing(limit int64, test func(x int64) (*Probe, bool, error)) (Search, error) {
	var s Search
	p, ok, err := test(1)
	if err != nil {
		return s, err
	}
	if !ok {
		s.Stop = p
		return s, nil
	}
	lo, loP := int64(1), p // passes
	hi := int64(0)         // fails (0: none found yet)
	var hiP *Probe
	for hi == 0 {
		x := min(2*lo, limit)
		if x == lo {
			return Search{Max: lo, Capped: true, At: loP}, nil
		}
		p, ok, err := test(x)
		if err != nil {
			return s, err
		}
		if ok {
			lo, loP = x, p
		} else {
			hi, hiP = x, p
		}
	}
	for hi-lo > 1 {
		x := lo + (hi-lo)/2
		p, ok, err := test(x)
		if err != nil {
			return s, err
		}
		if ok {
			lo, loP = x, p
		} else {
			hi, hiP = x, p
		}
	}
	return Search{Max: lo, At: loP, Stop: hiP}, nil
}
