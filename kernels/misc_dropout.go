package kernels

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/tsplit/tsplit/ir"
)

// Dropout. The ratio is input 1 (opset >= 12) or the ratio attribute
// (opset 10-11, default 0.5); training mode is input 2 (absent: false,
// which is also the only mode before opset 12). In inference mode, or
// with ratio 0, the output is a copy and the mask all true. In training
// mode each element is kept with probability 1-ratio and scaled by
// 1/(1-ratio); the optional output 1 is the bool keep mask.
//
// Randomness is reproducible: the stream is math/rand/v2's PCG seeded
// from the seed attribute (or, when absent, an FNV hash of the node
// name) and the execution step c.Step, so every step draws a fresh mask
// and reruns draw the same ones. Elements are drawn in fixed blocks,
// each block from its own stream, so the mask does not depend on how
// many goroutines run the kernel.

func init() {
	Register("", "Dropout", Kernel{DTypes: floatTypes, Run: guardRun(1, 1, miscDropoutRun)})
}

// DropoutBlock is the number of elements drawn from one PCG stream.
// A device that reproduces this kernel's masks (backend/cuda) draws the
// same blocks from the same seeds.
const DropoutBlock = 1 << 14

// DropoutSeed is the op's seed attribute or, when absent, the FNV-1a
// hash of its name (of its description when unnamed).
func DropoutSeed(op *ir.Op) uint64 {
	if a := op.Attr("seed"); a != nil && a.Type == ir.AttrInt {
		return uint64(a.Int)
	}
	h := fnv.New64a()
	h.Write([]byte(op.Name))
	if op.Name == "" {
		h.Write([]byte(op.Describe()))
	}
	return h.Sum64()
}

// DropoutStep is the second PCG seed of every block at execution step
// step: the step scrambled, so consecutive steps draw unrelated masks.
func DropoutStep(step int64) uint64 { return miscSplitmix(uint64(step) ^ 0x5bd1e995) }

// miscSplitmix scrambles a counter into a well-mixed 64-bit seed
// (SplitMix64's finaliser).
func miscSplitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func miscDropoutRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	mask := optOut(c, 1)
	if !y.Shape.Equal(x.Shape) || y.DType != x.DType {
		return c.Errorf("output is %v%v, want %v%v", y.DType, y.Shape, x.DType, x.Shape)
	}
	if mask != nil && (mask.DType != ir.Bool || !mask.Shape.Equal(x.Shape)) {
		return c.Errorf("mask output is %v%v, want bool%v", mask.DType, mask.Shape, x.Shape)
	}
	ratio := float64(c.Op.AttrFloat("ratio", 0.5))
	if t := optIn(c, 1); t != nil {
		if !t.DType.IsFloat() || t.Len() != 1 {
			return c.Errorf("input 1 (ratio) is %v%v, want a float scalar", t.DType, t.Shape)
		}
		r, err := readScalar(c, t, "input 1 (ratio)")
		if err != nil {
			return err
		}
		ratio = r
	}
	training := false
	if t := optIn(c, 2); t != nil {
		if t.DType != ir.Bool || t.Len() != 1 {
			return c.Errorf("input 2 (training_mode) is %v%v, want a bool scalar", t.DType, t.Shape)
		}
		training = t.Data[0] != 0
	}
	if !training || ratio == 0 {
		parCopy(y.Data, x.Data)
		if mask != nil {
			shFill(mask.Data, []byte{1})
		}
		return nil
	}
	if !(ratio > 0 && ratio < 1) {
		return c.Errorf("ratio is %v, must be in [0, 1)", ratio)
	}
	var m []byte
	if mask != nil {
		m = mask.Data
	}
	seed := DropoutSeed(c.Op)
	step := DropoutStep(c.Step)
	k := floatOf(x.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported (float32 or float64)", x.DType)
	}
	k.dropout(y, x, m, ratio, seed, step)
	return nil
}

// miscFloatKernels are the typed bodies of the misc_* files' float
// kernels.
type miscFloatKernels interface {
	dropout(y, x *Tensor, mask []byte, ratio float64, seed, step uint64)
}

func (floatK[T]) dropout(yt, xt *Tensor, mask []byte, ratio float64, seed, step uint64) {
	y, x := viewAs[T](yt), viewAs[T](xt)
	// Keep an element when a uniform 32-bit draw is >= thr: probability
	// (2^32 - thr) / 2^32 = 1 - ratio up to 2^-32.
	thr := uint32(min(math.Round(ratio*(1<<32)), math.MaxUint32))
	scale := T(1 / (1 - ratio))
	blocks := (len(x) + DropoutBlock - 1) / DropoutBlock
	parRange(blocks, DropoutBlock, func(b0, b1 int) {
		for b := b0; b < b1; b++ {
			rng := rand.NewPCG(miscSplitmix(seed+uint64(b)*0x9e3779b97f4a7c15), step)
			lo, hi := b*DropoutBlock, min((b+1)*DropoutBlock, len(x))
			for i := lo; i < hi; i += 2 {
				u := rng.Uint64()
				for k, r := range [2]uint32{uint32(u), uint32(u >> 32)} {
					j := i + k
					if j >= hi {
						break
					}
					keep := r >= thr
					if keep {
						y[j] = x[j] * scale
					} else {
						y[j] = 0
					}
					if mask != nil {
						mask[j] = b2byte(keep)
					}
				}
			}
		}
	})
}
