package native

import (
	"cmp"
	"slices"
)

// owners maps the pool's bytes to the allocation that last used them:
// disjoint segments ordered by offset. The lowering asks it which
// earlier allocations a new one reuses the bytes of (whose uses its
// first command must wait for); the loader asks it the same to check
// that the plan waits. Only the latest user of each byte is kept: the
// one before it was waited for when the latest took the bytes, and
// waiting is transitive.
type owners struct {
	segs []segment
}

type segment struct {
	lo, hi int64 // [lo, hi)
	owner  int
}

// take gives [lo, hi) to owner and returns the distinct previous owners
// of any of those bytes, in offset order.
func (o *owners) take(lo, hi int64, owner int) []int {
	if hi <= lo {
		return nil
	}
	// The first segment ending after lo.
	i, _ := slices.BinarySearchFunc(o.segs, lo, func(s segment, lo int64) int {
		return cmp.Compare(s.hi, lo+1)
	})
	j := i
	var prev []int
	for ; j < len(o.segs) && o.segs[j].lo < hi; j++ {
		if !slices.Contains(prev, o.segs[j].owner) {
			prev = append(prev, o.segs[j].owner)
		}
	}
	// Segments i..j-1 overlap [lo, hi): keep the parts outside it.
	var repl []segment
	if i < j && o.segs[i].lo < lo {
		repl = append(repl, segment{o.segs[i].lo, lo, o.segs[i].owner})
	}
	repl = append(repl, segment{lo, hi, owner})
	if i < j && o.segs[j-1].hi > hi {
		repl = append(repl, segment{hi, o.segs[j-1].hi, o.segs[j-1].owner})
	}
	o.segs = slices.Replace(o.segs, i, j, repl...)
	return prev
}
