package executor

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
)

// The finite check (Options.CheckFinite): a training step whose inputs,
// weights or learning rate make it diverge computes NaN or ±Inf, and the
// step would go on and report garbage. With the check, the run stops at
// the first op whose output holds a NaN, or a ±Inf that none of its
// inputs holds (a mask of -Inf that attention adds is deliberate: its
// Inf comes from a constant, and so does the Inf of the sum), or at the
// first fed input or weight holding one. A weight holding ±Inf (such a
// mask constant) is allowed; NaN never is.

// Reader is a Device whose memory the host can read in place (the CPU
// device). The finite check reads through it; on other devices it
// copies the tensor out with ToHost.
type Reader interface {
	Read(r Ref) []byte
}

// NonFiniteError is a value that holds a NaN or ±Inf: an op's output
// (wrapped in an *OpError naming the op) or a graph input or weight.
type NonFiniteError struct {
	Value string
	// Input says the value is a graph input or weight, not an op output.
	Input bool
	// Index is the first non-finite element (row-major) and Elem its
	// value.
	Index int64
	Elem  float64
}

func (e *NonFiniteError) Error() string {
	what := "output"
	if e.Input {
		what = "input"
	}
	return fmt.Sprintf("%s %q holds %v at element %d: the first non-finite value of the step (the finite check; a diverging step, or NaN/Inf in the inputs or weights)",
		what, e.Value, e.Elem, e.Index)
}

// firstNonFinite returns the index and value of the first NaN (or, with
// inf, ±Inf) element of raw data of type dt; -1 when there is none or dt
// is not a floating-point type.
func firstNonFinite(dt ir.DType, data []byte, inf bool) (int64, float64) {
	bad := func(f float64) bool { return math.IsNaN(f) || (inf && math.IsInf(f, 0)) }
	switch dt {
	case ir.Float:
		for i := 0; i+4 <= len(data); i += 4 {
			if f := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))); bad(f) {
				return int64(i / 4), f
			}
		}
	case ir.Double:
		for i := 0; i+8 <= len(data); i += 8 {
			if f := math.Float64frombits(binary.LittleEndian.Uint64(data[i:])); bad(f) {
				return int64(i / 8), f
			}
		}
	case ir.Float16, ir.BFloat16:
		// Exponent all ones: ±Inf with a zero mantissa, NaN otherwise.
		exp, man := uint16(0x7c00), uint16(0x03ff)
		if dt == ir.BFloat16 {
			exp, man = 0x7f80, 0x007f
		}
		for i := 0; i+2 <= len(data); i += 2 {
			h := binary.LittleEndian.Uint16(data[i:])
			if h&exp != exp {
				continue
			}
			f := math.Inf(1)
			if h&0x8000 != 0 {
				f = math.Inf(-1)
			}
			if h&man != 0 {
				f = math.NaN()
			}
			if bad(f) {
				return int64(i / 2), f
			}
		}
	}
	return -1, 0
}

// read returns r's bytes: in place on a Reader, else copied out.
func read(dev Device, r *Ref) ([]byte, error) {
	if rd, ok := dev.(Reader); ok {
		return rd.Read(*r), nil
	}
	buf := make([]byte, r.Bytes)
	return buf, dev.ToHost(buf, *r)
}

// checkOutputs is the finite check of a compute op that has just run.
func (x *Executor) checkOutputs(l *Launch) error { return checkLaunch(x.Dev, l) }

// checkLaunch is the finite check of a launch that has just run on dev
// (the Executor's and a Program's).
func checkLaunch(dev Device, l *Launch) error {
	for j, r := range l.Out {
		if r == nil || r.Bytes == 0 {
			continue
		}
		data, err := read(dev, r)
		if err != nil {
			return err
		}
		i, f := firstNonFinite(r.DType, data, true)
		if i < 0 {
			continue
		}
		if !math.IsNaN(f) {
			if inf, err := readsInf(dev, l); err != nil || inf {
				continue // ±Inf that came in: a deliberate mask, not divergence
			}
		}
		return &NonFiniteError{Value: l.Op.Output(j).Name, Index: i, Elem: f}
	}
	return nil
}

// readsInf reports whether an input or attribute tensor of the op holds
// ±Inf.
func readsInf(dev Device, l *Launch) (bool, error) {
	for _, r := range l.In {
		if r == nil || r.Bytes == 0 {
			continue
		}
		data, err := read(dev, r)
		if err != nil {
			return false, err
		}
		if i, f := firstNonFinite(r.DType, data, true); i >= 0 && math.IsInf(f, 0) {
			return true, nil
		}
	}
	for _, a := range l.Op.Attrs {
		if t := a.Tensor; t != nil {
			if i, _ := firstNonFinite(t.DType, t.Raw, true); i >= 0 {
				return true, nil
			}
		}
		for _, f := range a.Floats {
			if math.IsInf(float64(f), 0) {
				return true, nil
			}
		}
		if math.IsInf(float64(a.Float), 0) {
			return true, nil
		}
	}
	return false, nil
}

// checkInput is the finite check of a graph input or weight as it is
// placed: fed data must be finite; a weight may hold ±Inf (a mask
// constant), never NaN.
func checkInput(v *ir.Value, data []byte) error {
	fed := v.Kind != ir.KindInit
	if i, f := firstNonFinite(v.DType, data, fed); i >= 0 {
		return &NonFiniteError{Value: v.Name, Input: true, Index: i, Elem: f}
	}
	return nil
}
