package kernels

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tsplit/tsplit/ir"
)

// benchOp runs op's kernel repeatedly on preallocated tensors and
// reports GFLOP/s for flops per run.
func benchOp(b *testing.B, op *ir.Op, ins []nnIn, flops float64) {
	Threads = runtime.GOMAXPROCS(0)
	k := Lookup(op.Domain, op.Type)
	in := make([]*Tensor, len(ins))
	for i, x := range ins {
		if op.Input(i) == nil {
			continue
		}
		t, _ := NewTensor(ir.Float, ir.Shape(x.shape))
		copy(t.F32(), x.data)
		in[i] = t
	}
	out := make([]*Tensor, len(op.Outputs()))
	for i, v := range op.Outputs() {
		if v != nil {
			out[i], _ = NewTensor(v.DType, v.Shape)
		}
	}
	var ws []byte
	if k.Workspace != nil {
		ws = make([]byte, k.Workspace(op))
	}
	c := &Ctx{Op: op, In: in, Out: out, Workspace: ws}
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		if err := k.Run(c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(len(ws))/(1<<20), "MiB-scratch")
}

// benchConv benchmarks a batch-8 resnet18 convolution: c→m channels,
// k×k kernel, stride s, padding p, on hw×hw images.
func benchConv(b *testing.B, c, m, hw, k, s, p int) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 8
	x := nnF(r, n, int64(c), int64(hw), int64(hw))
	w := nnF(r, int64(m), int64(c), int64(k), int64(k))
	bias := nnF(r, int64(m))
	ins := []nnIn{x, w, bias}
	op := nnOp(b, 17, "Conv", ins, []string{"y"}, nnAInts("strides", int64(s), int64(s)), nnAInts("pads", int64(p), int64(p), int64(p), int64(p)))
	o := op.Output(0).Shape
	flops := 2 * float64(nnVol(o)) * float64(c*k*k)
	benchOp(b, op, ins, flops)
}

func BenchmarkConvResNet18LayerStem(b *testing.B) { benchConv(b, 3, 64, 224, 7, 2, 3) }
func BenchmarkConvResNet18Layer1(b *testing.B)    { benchConv(b, 64, 64, 56, 3, 1, 1) }
func BenchmarkConvResNet18Layer2(b *testing.B)    { benchConv(b, 128, 128, 28, 3, 1, 1) }
func BenchmarkConvResNet18Layer3(b *testing.B)    { benchConv(b, 256, 256, 14, 3, 1, 1) }
func BenchmarkConvResNet18Layer4(b *testing.B)    { benchConv(b, 512, 512, 7, 3, 1, 1) }
func BenchmarkConvResNet18Layer2Down(b *testing.B) {
	benchConv(b, 64, 128, 56, 3, 2, 1) // first conv of layer 2: stride 2
}
func BenchmarkConvResNet18Layer2Shortcut(b *testing.B) {
	benchConv(b, 64, 128, 56, 1, 2, 0) // 1×1 stride-2 shortcut
}

func BenchmarkDepthwiseConv3x3(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, w := nnF(r, 8, 128, 56, 56), nnF(r, 128, 1, 3, 3)
	ins := []nnIn{x, w, {}}
	op := nnOp(b, 17, "Conv", ins, []string{"y"}, nnAInt("group", 128), nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, ins, 2*float64(nnVol(op.Output(0).Shape))*9)
}

func BenchmarkMaxPoolResNet18(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	x := nnF(r, 8, 64, 112, 112)
	op := nnOp(b, 17, "MaxPool", []nnIn{x}, []string{"y"}, nnAInts("kernel_shape", 3, 3), nnAInts("strides", 2, 2), nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, []nnIn{x}, 9*float64(nnVol(op.Output(0).Shape)))
}

func BenchmarkMatMulAttention(b *testing.B) {
	// batch 8 × 12 heads of 128×64 · 64×128 (BERT-base scores).
	r := rand.New(rand.NewPCG(1, 4))
	a, bb := nnF(r, 8, 12, 128, 64), nnF(r, 8, 12, 64, 128)
	op := nnOp(b, 17, "MatMul", []nnIn{a, bb}, []string{"y"})
	benchOp(b, op, []nnIn{a, bb}, 2*8*12*128*64*128)
}

func BenchmarkConvTransposeDCGAN(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 5))
	x, w := nnF(r, 8, 256, 16, 16), nnF(r, 256, 128, 4, 4)
	ins := []nnIn{x, w, {}}
	op := nnOp(b, 17, "ConvTranspose", ins, []string{"y"}, nnAInts("strides", 2, 2), nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, ins, 2*8*256*16*16*128*16)
}

func BenchmarkMaxPoolResNet18Indices(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	x := nnF(r, 8, 64, 112, 112)
	op := nnOp(b, 17, "MaxPool", []nnIn{x}, []string{"y", "i"}, nnAInts("kernel_shape", 3, 3), nnAInts("strides", 2, 2), nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, []nnIn{x}, 9*float64(nnVol(op.Output(0).Shape)))
}

// benchConvWeightGrad benchmarks the Conv autodiff emits for the weight
// gradient of a k×k, stride-2 convolution with padding p of a batch of
// 64 3-channel 32×32 images into 8 channels: X as [3, 64, 32, 32]
// convolved with dY as [8, 64, 16, 16] (kernel 16×16, dilation 2), the
// output [3, 8, k, k]. The GEMM is tiny in M and N and K = 64·16·16 deep.
func benchConvWeightGrad(b *testing.B, k, p int) {
	r := rand.New(rand.NewPCG(1, 6))
	x, dy := nnF(r, 3, 64, 32, 32), nnF(r, 8, 64, 16, 16)
	end := int64(max(0, (k-1)+(16-1)*2+1-32-p))
	ins := []nnIn{x, dy, {}}
	op := nnOp(b, 17, "Conv", ins, []string{"y"}, nnAInts("dilations", 2, 2),
		nnAInts("pads", int64(p), int64(p), end, end))
	o := op.Output(0).Shape
	benchOp(b, op, ins, 2*float64(nnVol(o))*64*16*16)
}

func BenchmarkConvWeightGrad3x3(b *testing.B) { benchConvWeightGrad(b, 3, 1) }
func BenchmarkConvWeightGrad7x7(b *testing.B) { benchConvWeightGrad(b, 7, 3) }

// BenchmarkConvTransposeResNet18Layer1 is the input gradient of a
// resnet18 layer-1 convolution (batch 8, 64 → 64 channels, 3×3 pad 1,
// 56×56), the ConvTranspose autodiff emits.
func BenchmarkConvTransposeResNet18Layer1(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 7))
	x, w := nnF(r, 8, 64, 56, 56), nnF(r, 64, 64, 3, 3)
	ins := []nnIn{x, w, {}}
	op := nnOp(b, 17, "ConvTranspose", ins, []string{"y"}, nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, ins, 2*8*64*56*56*64*9)
}

// BenchmarkConvTransposeResNet18Layer3 is the input gradient of a
// resnet18 layer-3 convolution (256 → 256 channels, 3×3 pad 1, 14×14):
// a column matrix with more rows (256·9) than columns (14·14).
func BenchmarkConvTransposeResNet18Layer3(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 8))
	x, w := nnF(r, 8, 256, 14, 14), nnF(r, 256, 256, 3, 3)
	ins := []nnIn{x, w, {}}
	op := nnOp(b, 17, "ConvTranspose", ins, []string{"y"}, nnAInts("pads", 1, 1, 1, 1))
	benchOp(b, op, ins, 2*8*256*14*14*256*9)
}

// benchConvWeightGradResNet18 benchmarks the weight gradient autodiff
// emits for a resnet18 3×3, pad-1 convolution of c → m channels at
// hw×hw (stride s), batch 8: the Conv of X as [c, 8, hw, hw] with dY as
// [m, 8, o, o] for kernel (dilation s), giving [c, m, 3, 3].
func benchConvWeightGradResNet18(b *testing.B, c, m, hw, s int) {
	r := rand.New(rand.NewPCG(1, 9))
	o := (hw+2-3)/s + 1
	x, dy := nnF(r, int64(c), 8, int64(hw), int64(hw)), nnF(r, int64(m), 8, int64(o), int64(o))
	end := int64(max(0, 2+(o-1)*s+1-hw-1))
	ins := []nnIn{x, dy, {}}
	op := nnOp(b, 17, "Conv", ins, []string{"y"}, nnAInts("dilations", int64(s), int64(s)), nnAInts("pads", 1, 1, end, end))
	benchOp(b, op, ins, 2*float64(c*m*9)*8*float64(o*o))
}

func BenchmarkConvWeightGradResNet18Layer1(b *testing.B) {
	benchConvWeightGradResNet18(b, 64, 64, 56, 1)
}
func BenchmarkConvWeightGradResNet18Layer2(b *testing.B) {
	benchConvWeightGradResNet18(b, 128, 128, 28, 1)
}
func BenchmarkConvWeightGradResNet18Layer4(b *testing.B) {
	benchConvWeightGradResNet18(b, 512, 512, 7, 1)
}
func BenchmarkConvWeightGradResNet18Layer2Down(b *testing.B) {
	benchConvWeightGradResNet18(b, 64, 128, 56, 2)
}

// processCPU is the CPU time (user + system) the process has used: on a
// machine shared with other jobs it varies less than the wall clock.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
