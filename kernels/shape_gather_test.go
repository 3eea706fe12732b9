package kernels

import (
	"testing"

	"github.com/tsplit/tsplit/ir/irtest"
)

func TestGather(t *testing.T) {
	// An embedding lookup: rows of a [4,3] table.
	table := ktF32(ktS(4, 3), ktSeq(12, 1, 0)...)
	got := ktRun1(t, "Gather", []ktIn{ktR(table), ktR(ktI64(ktS(2, 2), 3, 0, -1, 1))})
	ktSame(t, "Gather axis 0", got, ktF32(ktS(2, 2, 3), 9, 10, 11, 0, 1, 2, 9, 10, 11, 3, 4, 5))
	// Columns, int32 indices, negative axis.
	got = ktRun1(t, "Gather", []ktIn{ktR(table), ktR(ktI32(ktS(2), 2, -3))}, irtest.Int("axis", -1))
	ktSame(t, "Gather axis -1", got, ktF32(ktS(4, 2), 2, 0, 5, 3, 8, 6, 11, 9))
	// A scalar index drops the axis.
	got = ktRun1(t, "Gather", []ktIn{ktR(ktI64(ktS(3), 10, 20, 30)), ktR(ktI64(nil, 1))})
	ktSame(t, "Gather scalar", got, ktI64(ktS(), 20))
	// Out of range is an error.
	ktErr(t, 18, "Gather", []ktIn{ktR(table), ktR(ktI64(ktS(1), 4))}, 1)
	ktErr(t, 18, "Gather", []ktIn{ktR(table), ktR(ktI64(ktS(1), -5))}, 1)
}

func TestGatherElements(t *testing.T) {
	// Examples from the ONNX operator documentation.
	got := ktRun1(t, "GatherElements", []ktIn{ktR(ktF32(ktS(2, 2), 1, 2, 3, 4)), ktR(ktI64(ktS(2, 2), 0, 0, 1, 0))}, irtest.Int("axis", 1))
	ktSame(t, "GatherElements axis 1", got, ktF32(ktS(2, 2), 1, 1, 4, 3))
	got = ktRun1(t, "GatherElements", []ktIn{ktR(ktF32(ktS(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9)), ktR(ktI32(ktS(2, 3), 1, 2, 0, 2, 0, 0))})
	ktSame(t, "GatherElements axis 0", got, ktF32(ktS(2, 3), 4, 8, 3, 7, 2, 3))
	got = ktRun1(t, "GatherElements", []ktIn{ktR(ktI64(ktS(2, 3), 1, 2, 3, 4, 5, 6)), ktR(ktI64(ktS(1, 2), -1, -3))}, irtest.Int("axis", -1))
	ktSame(t, "GatherElements negative", got, ktI64(ktS(1, 2), 3, 1))
	ktErr(t, 18, "GatherElements", []ktIn{ktR(ktF32(ktS(2), 1, 2)), ktR(ktI64(ktS(1), 2))}, 1)
}

func TestScatterElements(t *testing.T) {
	data := ktF32(ktS(3, 3))
	got := ktRun1(t, "ScatterElements", []ktIn{ktR(data), ktR(ktI64(ktS(2, 3), 1, 0, 2, 0, 2, 1)), ktR(ktF32(ktS(2, 3), 1, 1.1, 1.2, 2, 2.1, 2.2))})
	ktSame(t, "ScatterElements axis 0", got, ktF32(ktS(3, 3), 2, 1.1, 0, 1, 0, 2.2, 0, 2.1, 1.2))
	got = ktRun1(t, "ScatterElements", []ktIn{ktR(ktF32(ktS(1, 5), 1, 2, 3, 4, 5)), ktR(ktI32(ktS(1, 2), 1, -2)), ktR(ktF32(ktS(1, 2), 1.1, 2.1))}, irtest.Int("axis", 1))
	ktSame(t, "ScatterElements axis 1", got, ktF32(ktS(1, 5), 1, 1.1, 3, 2.1, 5))
	// reduction add with a duplicate index; none with a duplicate: the last wins.
	got = ktRun1(t, "ScatterElements", []ktIn{ktR(ktF32(ktS(1, 5), 1, 2, 3, 4, 5)), ktR(ktI64(ktS(1, 2), 1, 1)), ktR(ktF32(ktS(1, 2), 1.5, 2.25))},
		irtest.Int("axis", 1), irtest.String("reduction", "add"))
	ktSame(t, "ScatterElements add", got, ktF32(ktS(1, 5), 1, 5.75, 3, 4, 5))
	got = ktRun1(t, "ScatterElements", []ktIn{ktR(ktI64(ktS(4), 1, 2, 3, 4)), ktR(ktI64(ktS(3), 0, 3, 0)), ktR(ktI64(ktS(3), 7, 8, 9))})
	ktSame(t, "ScatterElements i64 last wins", got, ktI64(ktS(4), 9, 2, 3, 8))
	got = ktRun1(t, "ScatterElements", []ktIn{ktR(ktI64(ktS(4), 1, 2, 3, 4)), ktR(ktI64(ktS(3), 0, 3, 0)), ktR(ktI64(ktS(3), 7, 8, 9))}, irtest.String("reduction", "max"))
	ktSame(t, "ScatterElements max", got, ktI64(ktS(4), 9, 2, 3, 8))
	got = ktRun1(t, "ScatterElements", []ktIn{ktR(ktI64(ktS(4), 1, 2, 3, 4)), ktR(ktI64(ktS(2), 0, 0)), ktR(ktI64(ktS(2), 7, 9))}, irtest.String("reduction", "mul"))
	ktSame(t, "ScatterElements mul", got, ktI64(ktS(4), 63, 2, 3, 4))
	ktErr(t, 18, "ScatterElements", []ktIn{ktR(ktF32(ktS(2), 1, 2)), ktR(ktI64(ktS(1), 2)), ktR(ktF32(ktS(1), 0))}, 1)
}

func TestScatterND(t *testing.T) {
	// ONNX documentation example 1.
	got := ktRun1(t, "ScatterND", []ktIn{ktR(ktF32(ktS(8), 1, 2, 3, 4, 5, 6, 7, 8)), ktR(ktI64(ktS(4, 1), 4, 3, 1, 7)), ktR(ktF32(ktS(4), 9, 10, 11, 12))})
	ktSame(t, "ScatterND 1-D", got, ktF32(ktS(8), 1, 11, 3, 10, 9, 6, 7, 12))
	// Example 2, shrunk: replace whole slices of a [4,2,2] tensor.
	data := ktF32(ktS(4, 2, 2), ktSeq(16, 1, 0)...)
	upd := ktF32(ktS(2, 2, 2), 5, 5, 5, 5, 6, 6, 6, 6)
	got = ktRun1(t, "ScatterND", []ktIn{ktR(data), ktR(ktI64(ktS(2, 1), 0, -2)), ktR(upd)})
	ktSame(t, "ScatterND slices", got, ktF32(ktS(4, 2, 2), 5, 5, 5, 5, 4, 5, 6, 7, 6, 6, 6, 6, 12, 13, 14, 15))
	// Full-index tuples with reduction add (duplicates accumulate).
	got = ktRun1(t, "ScatterND", []ktIn{ktR(ktF32(ktS(2, 2), 1, 2, 3, 4)), ktR(ktI64(ktS(3, 2), 0, 1, 1, 0, 0, 1)), ktR(ktF32(ktS(3), 10, 20, 30))},
		irtest.String("reduction", "add"))
	ktSame(t, "ScatterND add", got, ktF32(ktS(2, 2), 1, 42, 23, 4))
	ktErr(t, 18, "ScatterND", []ktIn{ktR(ktF32(ktS(2), 1, 2)), ktR(ktI64(ktS(1, 1), 2)), ktR(ktF32(ktS(1), 0))}, 1)
}

func TestOneHot(t *testing.T) {
	vals := ktF32(ktS(2), 0, 1)
	got := ktRun1(t, "OneHot", []ktIn{ktR(ktI64(ktS(3), 0, 2, -1)), ktC(ktI64(nil, 4)), ktR(vals)})
	ktSame(t, "OneHot axis -1", got, ktF32(ktS(3, 4), 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1))
	got = ktRun1(t, "OneHot", []ktIn{ktR(ktI64(ktS(3), 0, 2, 7)), ktC(ktI64(nil, 3)), ktR(ktI64(ktS(2), -1, 5))}, irtest.Int("axis", 0))
	ktSame(t, "OneHot axis 0 out of range", got, ktI64(ktS(3, 3), 5, -1, -1, -1, -1, -1, -1, 5, -1))
	got = ktRun1(t, "OneHot", []ktIn{ktR(ktF32(ktS(2, 1), 1.7, -2)), ktC(ktF32(nil, 3)), ktR(vals)}, irtest.Int("axis", 1))
	ktSame(t, "OneHot float indices middle axis", got, ktF32(ktS(2, 3, 1), 0, 1, 0, 0, 1, 0))
}
