package kernels

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// Benchmarks of the ew_/shape_/reduce_/misc_ kernels on transformer-
// sized activations (batch 8, sequence 512, hidden 768: 3M floats,
// 12 MB). SetBytes counts the bytes read and written, so MB/s compares
// with memory bandwidth.

func ktBench(b *testing.B, typ string, ins []ktIn, bytes int64, attrs ...ir.Attr) {
	op := ktBuild(b, 18, typ, ins, 1, attrs...)
	ts := make([]*Tensor, len(ins))
	for i, in := range ins {
		ts[i] = in.t
	}
	out, err := Eval(op, ts, 0)
	if err != nil {
		b.Fatal(err)
	}
	k := Lookup("", typ)
	c := &Ctx{Op: op, In: ts, Out: out}
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := k.Run(c); err != nil {
			b.Fatal(err)
		}
	}
}

var ktAct = ktS(8, 512, 768)

func ktActT() *Tensor { return ktF32(ktAct, ktRand(ktNumel(ktAct), 1)...) }

func BenchmarkKtAdd(b *testing.B) {
	ktBench(b, "Add", []ktIn{ktR(ktActT()), ktR(ktActT())}, 3*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtAddBias(b *testing.B) {
	ktBench(b, "Add", []ktIn{ktR(ktActT()), ktR(ktF32(ktS(768), ktRand(768, 2)...))}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtMulScalar(b *testing.B) {
	ktBench(b, "Mul", []ktIn{ktR(ktActT()), ktR(ktF32(nil, 0.125))}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtRelu(b *testing.B) {
	ktBench(b, "Relu", []ktIn{ktR(ktActT())}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtGelu(b *testing.B) {
	ktBench(b, "Gelu", []ktIn{ktR(ktActT())}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtSigmoid(b *testing.B) {
	ktBench(b, "Sigmoid", []ktIn{ktR(ktActT())}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtReduceSumBatch(b *testing.B) { // bias gradient: [4096,768] → [768]
	ktBench(b, "ReduceSum", []ktIn{ktR(ktActT()), ktC(ktI64(ktS(2), 0, 1))}, 4*int64(ktNumel(ktAct)))
}

func BenchmarkKtReduceMeanLast(b *testing.B) {
	ktBench(b, "ReduceMean", []ktIn{ktR(ktActT()), ktC(ktI64(ktS(1), -1))}, 4*int64(ktNumel(ktAct)))
}

func BenchmarkKtTransposeHeads(b *testing.B) { // [8,512,12,64] → [8,12,512,64]
	x := ktF32(ktS(8, 512, 12, 64), ktRand(ktNumel(ktAct), 3)...)
	ktBench(b, "Transpose", []ktIn{ktR(x)}, 2*4*int64(ktNumel(ktAct)), irtest.Ints("perm", 0, 2, 1, 3))
}

func BenchmarkKtTransposeKT(b *testing.B) { // [8,12,512,64] → [8,12,64,512]
	x := ktF32(ktS(8, 12, 512, 64), ktRand(ktNumel(ktAct), 4)...)
	ktBench(b, "Transpose", []ktIn{ktR(x)}, 2*4*int64(ktNumel(ktAct)), irtest.Ints("perm", 0, 1, 3, 2))
}

func BenchmarkKtGatherEmbedding(b *testing.B) {
	table := ktF32(ktS(30000, 768), ktRand(30000*768, 5)...)
	idx := make([]int64, 8*512)
	for i := range idx {
		idx[i] = int64(i*7919) % 30000
	}
	ktBench(b, "Gather", []ktIn{ktR(table), ktR(ktI64(ktS(8, 512), idx...))}, 2*4*int64(ktNumel(ktAct)))
}

func BenchmarkKtCastHalf(b *testing.B) {
	ktBench(b, "Cast", []ktIn{ktR(ktActT())}, 6*int64(ktNumel(ktAct)), irtest.Int("to", int64(ir.Float16)))
}

func BenchmarkKtWhere(b *testing.B) {
	mask := make([]bool, 512*512)
	for i := range mask {
		mask[i] = i%512 <= i/512
	}
	ktBench(b, "Where", []ktIn{ktR(ktBool(ktS(512, 512), mask...)), ktR(ktF32(ktS(12, 512, 512), ktRand(12*512*512, 6)...)), ktR(ktF32(nil, -1e9))},
		2*4*12*512*512)
}

func BenchmarkKtSlice(b *testing.B) {
	ktBench(b, "Slice", []ktIn{ktR(ktActT()), ktC(ktI64(ktS(1), 0)), ktC(ktI64(ktS(1), 384)), ktC(ktI64(ktS(1), -1))}, 4*int64(ktNumel(ktAct)))
}

func BenchmarkKtDropout(b *testing.B) {
	op := ktBuild(b, 13, "Dropout", []ktIn{ktR(ktActT()), ktR(ktF32(nil, 0.1)), ktR(ktBool(nil, true))}, 2)
	ins := []*Tensor{ktActT(), ktF32(nil, 0.1), ktBool(nil, true)}
	out, err := Eval(op, ins, 0)
	if err != nil {
		b.Fatal(err)
	}
	c := &Ctx{Op: op, In: ins, Out: out}
	b.SetBytes(9 * int64(ktNumel(ktAct)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Step = int64(i)
		if err := Lookup("", "Dropout").Run(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKtReluGrad is the ReLU gradient autodiff emits, Where(y > 0,
// dy, 0), on a resnet18 layer-1 activation at batch 8 (Greater, then
// Where): 1.6M floats.
func BenchmarkKtReluGrad(b *testing.B) {
	s := ktS(8, 64, 56, 56)
	n := ktNumel(s)
	y, dy := ktF32(s, ktRand(n, 7)...), ktF32(s, ktRand(n, 8)...)
	zero := ktF32(nil, 0)
	gt := ktBuild(b, 18, "Greater", []ktIn{ktR(y), ktR(zero)}, 1)
	mask, err := Eval(gt, []*Tensor{y, zero}, 0)
	if err != nil {
		b.Fatal(err)
	}
	wh := ktBuild(b, 18, "Where", []ktIn{ktR(mask[0]), ktR(dy), ktR(zero)}, 1)
	out, err := Eval(wh, []*Tensor{mask[0], dy, zero}, 0)
	if err != nil {
		b.Fatal(err)
	}
	kg, kw := Lookup("", "Greater"), Lookup("", "Where")
	cg := &Ctx{Op: gt, In: []*Tensor{y, zero}, Out: mask}
	cw := &Ctx{Op: wh, In: []*Tensor{mask[0], dy, zero}, Out: out}
	b.SetBytes(int64(n) * (4 + 1 + 1 + 4 + 4))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := kg.Run(cg); err != nil {
			b.Fatal(err)
		}
		if err := kw.Run(cw); err != nil {
			b.Fatal(err)
		}
	}
}
