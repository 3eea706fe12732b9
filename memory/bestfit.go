package memory

import (
	"fmt"
	"sort"
)

// BestFit is a best-fit allocator over one pool: the free space is a
// list of segments sorted by offset (moDNN's linked list of segments);
// an allocation takes the smallest free segment that fits, the lowest
// offset on ties, and frees merge with their neighbours. The free tail
// of the pool (the segment reaching its end) is used only when no other
// segment fits, so the pool grows upward only when it must. That makes
// the offsets independent of the pool size: any pool at least as large
// as the reach of a sequence of calls gives the same offsets.
type BestFit struct {
	size  int64
	free  []segment // sorted by offset, never adjacent
	used  int64
	high  int64 // most bytes in use at once
	reach int64 // highest end offset ever handed out
}

type segment struct{ off, size int64 }

// NewBestFit makes an allocator over a pool of size bytes.
func NewBestFit(size int64) *BestFit {
	b := &BestFit{size: size}
	if size > 0 {
		b.free = []segment{{0, size}}
	}
	return b
}

// AllocError says why an allocation failed.
type AllocError struct {
	Asked, Free, Largest, Pool int64
}

func (e *AllocError) Error() string {
	return fmt.Sprintf("%d bytes asked, %d bytes free, largest free block %d bytes (pool %d bytes)", e.Asked, e.Free, e.Largest, e.Pool)
}

// Alloc returns the offset of a new block of n bytes.
//
// An empty block (an empty tensor: ONNX allows shapes such as [4,0])
// occupies nothing. It takes the offset of a free segment like any
// block, and its Free leaves a zero-size segment in the list; planned
// layouts record those offsets, so that behaviour stays. Two cases
// that used to fail are answered: an empty block no segment serves (all
// of the pool in use, a pool of 0 bytes) is placed at 0, and the tail
// is found behind the zero-size segments that a free can leave after
// it.
func (b *BestFit) Alloc(n int64) (int64, error) {
	best := -1
	for i, s := range b.free {
		if s.off+s.size == b.size {
			continue // the tail: last resort
		}
		if s.size >= n && (best < 0 || s.size < b.free[best].size) {
			best = i
		}
	}
	if best < 0 {
		if t := b.tail(); t >= 0 && b.free[t].size >= n {
			best = t
		}
	}
	if best < 0 {
		if n == 0 {
			return 0, nil
		}
		return 0, &AllocError{Asked: n, Free: b.size - b.used, Largest: b.Largest(), Pool: b.size}
	}
	s := b.free[best]
	off := s.off
	if s.size == n {
		b.free = append(b.free[:best], b.free[best+1:]...)
	} else {
		b.free[best] = segment{s.off + n, s.size - n}
		// Zero-size segments the block now covers would break the
		// list's order by offset.
		k := best + 1
		for k < len(b.free) && b.free[k].size == 0 && b.free[k].off < s.off+n {
			k++
		}
		b.free = append(b.free[:best+1], b.free[k:]...)
	}
	b.used += n
	b.high = max(b.high, b.used)
	b.reach = max(b.reach, off+n)
	return off, nil
}

// tail is the index of the free segment that reaches the end of the
// pool (-1: none): the last one with bytes. Zero-size segments left by
// frees of empty blocks may follow it.
func (b *BestFit) tail() int {
	for t := len(b.free) - 1; t >= 0; t-- {
		if s := b.free[t]; s.size > 0 {
			if s.off+s.size == b.size {
				return t
			}
			return -1
		}
	}
	return -1
}

// Free returns a block to the pool.
func (b *BestFit) Free(off, n int64) {
	i := sort.Search(len(b.free), func(i int) bool { return b.free[i].off > off })
	b.free = append(b.free, segment{})
	copy(b.free[i+1:], b.free[i:])
	b.free[i] = segment{off, n}
	// Merge with the next, then the previous segment.
	if i+1 < len(b.free) && b.free[i].off+b.free[i].size == b.free[i+1].off {
		b.free[i].size += b.free[i+1].size
		b.free = append(b.free[:i+1], b.free[i+2:]...)
	}
	if i > 0 && b.free[i-1].off+b.free[i-1].size == b.free[i].off {
		b.free[i-1].size += b.free[i].size
		b.free = append(b.free[:i], b.free[i+1:]...)
	}
	b.used -= n
}

// Used is the bytes currently allocated.
func (b *BestFit) Used() int64 { return b.used }

// HighWater is the most bytes allocated at once so far.
func (b *BestFit) HighWater() int64 { return b.high }

// Reach is the highest end offset handed out so far: the pool size this
// sequence of allocations needs.
func (b *BestFit) Reach() int64 { return b.reach }

// Largest is the largest free block.
func (b *BestFit) Largest() int64 {
	var l int64
	for _, s := range b.free {
		l = max(l, s.size)
	}
	return l
}

// Fragmentation is 1 − largest free block / free bytes (0 when the free
// space is one block or none).
func (b *BestFit) Fragmentation() float64 {
	free := b.size - b.used
	if free <= 0 {
		return 0
	}
	return 1 - float64(b.Largest())/float64(free)
}

// Need is the smallest pool in which the runtime's best-fit placement of
// this model succeeds: the reach of replaying its allocation sequence in
// an unbounded pool. Replaying in a pool of exactly Need bytes hands out
// the same offsets (see BestFit), so the run fits exactly.
func (m *Model) Need() int64 {
	_, reach := m.Replay()
	return reach
}

// Replay places every interval as the runtime's best-fit allocator
// would, returning the offsets (by interval) and the reach.
func (m *Model) Replay() ([]int64, int64) {
	var total int64
	for _, iv := range m.Intervals {
		total += iv.Bytes
	}
	b := NewBestFit(total)
	offs := make([]int64, len(m.Intervals))
	for _, e := range m.Events {
		iv := m.Intervals[e.Interval]
		if e.Free {
			b.Free(offs[e.Interval], iv.Bytes)
			continue
		}
		off, err := b.Alloc(iv.Bytes)
		if err != nil {
			panic("memory: unbounded pool ran out: " + err.Error())
		}
		offs[e.Interval] = off
	}
	return offs, b.Reach()
}
