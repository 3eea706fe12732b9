package zoo

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/onnxpb"
)

// fmap is an NCHW feature map: its value name, channels and spatial size.
type fmap struct {
	x    string
	c    int64
	h, w int64
}

// cnnInput declares the image input.
func (b *builder) cnnInput() fmap {
	s := b.cfg.ImageSize
	x := b.input("input", onnxpb.TensorProto_FLOAT, b.batchDim(), 3, s, s)
	return fmap{x: x, c: 3, h: s, w: s}
}

// window is a 2-D kernel geometry: kernel, stride and symmetric padding.
type window struct{ kh, kw, sh, sw, ph, pw int64 }

func win(k, s, p int64) window { return window{k, k, s, s, p, p} }

func (wd window) out(name string, b *builder, in fmap) (int64, int64) {
	h := (in.h+2*wd.ph-wd.kh)/wd.sh + 1
	w := (in.w+2*wd.pw-wd.kw)/wd.sw + 1
	if in.h+2*wd.ph < wd.kh || in.w+2*wd.pw < wd.kw || h < 1 || w < 1 {
		failf("%s: image size %d is too small: the %dx%d input of %s is smaller than its %dx%d window",
			b.name, b.cfg.ImageSize, in.h, in.w, name, wd.kh, wd.kw)
	}
	return h, w
}

func (wd window) attrs() []*onnxpb.AttributeProto {
	return []*onnxpb.AttributeProto{
		aInts("kernel_shape", wd.kh, wd.kw),
		aInts("pads", wd.ph, wd.pw, wd.ph, wd.pw),
		aInts("strides", wd.sh, wd.sw),
	}
}

// conv is a torch Conv2d (He-uniform weight; bias optional).
func (b *builder) conv(name string, in fmap, cout int64, wd window, bias bool) fmap {
	h, w := wd.out(name, b, in)
	fanIn := in.c * wd.kh * wd.kw
	inputs := []string{in.x, b.uniform(name+".weight", []int64{cout, in.c, wd.kh, wd.kw}, math.Sqrt(6/float64(fanIn)))}
	if bias {
		inputs = append(inputs, b.uniform(name+".bias", []int64{cout}, 1/math.Sqrt(float64(fanIn))))
	}
	attrs := append([]*onnxpb.AttributeProto{aInts("dilations", 1, 1), aInt("group", 1)}, wd.attrs()...)
	return fmap{x: b.op("Conv", name, inputs, attrs...), c: cout, h: h, w: w}
}

// bn is a training-mode BatchNormalization with torch's parameter names.
func (b *builder) bn(name string, in fmap, eps float32) fmap {
	c := []int64{in.c}
	inputs := []string{
		in.x,
		b.fill(name+".weight", c, 1),
		b.fill(name+".bias", c, 0),
		b.fill(name+".running_mean", c, 0),
		b.fill(name+".running_var", c, 1),
	}
	outs := b.node("BatchNormalization", name, inputs, []string{"running_mean", "running_var"},
		aFloat("epsilon", eps), aFloat("momentum", 0.9), aInt("training_mode", 1))
	in.x = outs[0]
	return in
}

func (b *builder) relu(name string, in fmap) fmap {
	in.x = b.op("Relu", name, []string{in.x})
	return in
}

func (b *builder) maxpool(name string, in fmap, wd window) fmap {
	h, w := wd.out(name, b, in)
	attrs := append([]*onnxpb.AttributeProto{aInt("ceil_mode", 0)}, wd.attrs()...)
	return fmap{x: b.op("MaxPool", name, []string{in.x}, attrs...), c: in.c, h: h, w: w}
}

// avgpool is torch's AvgPool2d with count_include_pad=False.
func (b *builder) avgpool(name string, in fmap, wd window) fmap {
	h, w := wd.out(name, b, in)
	attrs := append([]*onnxpb.AttributeProto{aInt("ceil_mode", 0), aInt("count_include_pad", 0)}, wd.attrs()...)
	return fmap{x: b.op("AveragePool", name, []string{in.x}, attrs...), c: in.c, h: h, w: w}
}

// concat joins feature maps along channels.
func (b *builder) concat(name string, parts ...fmap) fmap {
	out := fmap{h: parts[0].h, w: parts[0].w}
	var xs []string
	for _, p := range parts {
		if p.h != out.h || p.w != out.w {
			panic(fmt.Sprintf("zoo: internal error: %s joins %dx%d with %dx%d", name, out.h, out.w, p.h, p.w))
		}
		xs = append(xs, p.x)
		out.c += p.c
	}
	out.x = b.op("Concat", name, xs, aInt("axis", 1))
	return out
}

// gemm is a torch Linear on a [N, in] matrix: Gemm with transB=1 and
// weight [out, in], drawn from U(±√(gain/in)).
func (b *builder) gemm(name, x string, in, out int64, gain float64) string {
	w := b.uniform(name+".weight", []int64{out, in}, math.Sqrt(gain/float64(in)))
	bias := b.uniform(name+".bias", []int64{out}, 1/math.Sqrt(float64(in)))
	return b.op("Gemm", name, []string{x, w, bias}, aFloat("alpha", 1), aFloat("beta", 1), aInt("transB", 1))
}

// head is GlobalAveragePool, Flatten, optional Dropout and the classifier.
func (b *builder) head(in fmap, pool, flatten, drop, fc string) {
	x := b.op("GlobalAveragePool", pool, []string{in.x})
	x = b.op("Flatten", flatten, []string{x}, aInt("axis", 1))
	if drop != "" {
		x = b.dropout(drop, x)
	}
	x = b.gemm(fc, x, in.c, b.cfg.Classes, 3)
	b.output(x, b.batchDim(), b.cfg.Classes)
}

// VGG configurations D and E of torchvision (0: max pool).
var (
	vgg16Cfg = []int64{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}
	vgg19Cfg = []int64{64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0}
)

func buildVGG(b *builder, cfg []int64) {
	x := b.cnnInput()
	i := 0
	for _, v := range cfg {
		if v == 0 {
			x = b.maxpool(fmt.Sprintf("features.%d", i), x, win(2, 2, 0))
			i++
			continue
		}
		x = b.conv(fmt.Sprintf("features.%d", i), x, b.ch(v), win(3, 1, 1), true)
		x = b.relu(fmt.Sprintf("features.%d", i+1), x)
		i += 2
	}
	// AdaptiveAvgPool2d((7, 7)), where it is a plain pool.
	if x.h == x.w && x.h%7 == 0 {
		k := x.h / 7
		x = b.avgpool("avgpool", x, win(k, k, 0))
	}
	flat := b.op("Flatten", "flatten", []string{x.x}, aInt("axis", 1))
	hidden := b.ch(4096)
	y := b.gemm("classifier.0", flat, x.c*x.h*x.w, hidden, 6)
	y = b.op("Relu", "classifier.1", []string{y})
	y = b.dropout("classifier.2", y)
	y = b.gemm("classifier.3", y, hidden, hidden, 6)
	y = b.op("Relu", "classifier.4", []string{y})
	y = b.dropout("classifier.5", y)
	y = b.gemm("classifier.6", y, hidden, b.cfg.Classes, 3)
	b.output(y, b.batchDim(), b.cfg.Classes)
}

const bnEps = 1e-5

func buildResNet(b *builder, bottleneck bool, blocks []int) {
	x := b.cnnInput()
	x = b.conv("conv1", x, b.ch(64), win(7, 2, 3), false)
	x = b.bn("bn1", x, bnEps)
	x = b.relu("relu", x)
	x = b.maxpool("maxpool", x, win(3, 2, 1))
	expansion := int64(1)
	if bottleneck {
		expansion = 4
	}
	inplanes := x.c
	for li, n := range blocks {
		planes := b.ch(64 << li)
		for bi := range n {
			stride := int64(1)
			if li > 0 && bi == 0 {
				stride = 2
			}
			p := fmt.Sprintf("layer%d.%d", li+1, bi)
			identity := x
			var out fmap
			if bottleneck {
				out = b.conv(p+".conv1", x, planes, win(1, 1, 0), false)
				out = b.relu(p+".relu", b.bn(p+".bn1", out, bnEps))
				out = b.conv(p+".conv2", out, planes, win(3, stride, 1), false)
				out = b.relu(p+".relu", b.bn(p+".bn2", out, bnEps))
				out = b.conv(p+".conv3", out, planes*expansion, win(1, 1, 0), false)
				out = b.bn(p+".bn3", out, bnEps)
			} else {
				out = b.conv(p+".conv1", x, planes, win(3, stride, 1), false)
				out = b.relu(p+".relu", b.bn(p+".bn1", out, bnEps))
				out = b.conv(p+".conv2", out, planes, win(3, 1, 1), false)
				out = b.bn(p+".bn2", out, bnEps)
			}
			if stride != 1 || inplanes != planes*expansion {
				identity = b.conv(p+".downsample.0", x, planes*expansion, win(1, stride, 0), false)
				identity = b.bn(p+".downsample.1", identity, bnEps)
			}
			out.x = b.op("Add", p+"/add", []string{out.x, identity.x})
			x = b.relu(p+".relu", out)
			inplanes = planes * expansion
		}
	}
	b.head(x, "avgpool", "flatten", "", "fc")
}

// Inception-V4, in the layout (and parameter names) of Cadene's
// pretrainedmodels.inceptionv4.

const inceptionEps = 1e-3

// basic is BasicConv2d: conv (no bias) + BN + ReLU.
func (b *builder) basic(name string, in fmap, cout int64, wd window) fmap {
	x := b.conv(name+".conv", in, b.ch(cout), wd, false)
	x = b.bn(name+".bn", x, inceptionEps)
	return b.relu(name+".relu", x)
}

func rect(kh, kw, ph, pw int64) window { return window{kh, kw, 1, 1, ph, pw} }

func buildInceptionV4(b *builder) {
	x := b.cnnInput()
	f := func(i int) string { return fmt.Sprintf("features.%d", i) }
	x = b.basic(f(0), x, 32, win(3, 2, 0))
	x = b.basic(f(1), x, 32, win(3, 1, 0))
	x = b.basic(f(2), x, 64, win(3, 1, 1))
	// Mixed_3a
	x = b.concat(f(3)+"/concat",
		b.maxpool(f(3)+".maxpool", x, win(3, 2, 0)),
		b.basic(f(3)+".conv", x, 96, win(3, 2, 0)))
	// Mixed_4a
	{
		p := f(4)
		b0 := b.basic(p+".branch0.0", x, 64, win(1, 1, 0))
		b0 = b.basic(p+".branch0.1", b0, 96, win(3, 1, 0))
		b1 := b.basic(p+".branch1.0", x, 64, win(1, 1, 0))
		b1 = b.basic(p+".branch1.1", b1, 64, rect(1, 7, 0, 3))
		b1 = b.basic(p+".branch1.2", b1, 64, rect(7, 1, 3, 0))
		b1 = b.basic(p+".branch1.3", b1, 96, win(3, 1, 0))
		x = b.concat(p+"/concat", b0, b1)
	}
	// Mixed_5a
	x = b.concat(f(5)+"/concat",
		b.basic(f(5)+".conv", x, 192, win(3, 2, 0)),
		b.maxpool(f(5)+".maxpool", x, win(3, 2, 0)))
	i := 6
	for range 4 { // Inception_A
		p := f(i)
		b0 := b.basic(p+".branch0", x, 96, win(1, 1, 0))
		b1 := b.basic(p+".branch1.0", x, 64, win(1, 1, 0))
		b1 = b.basic(p+".branch1.1", b1, 96, win(3, 1, 1))
		b2 := b.basic(p+".branch2.0", x, 64, win(1, 1, 0))
		b2 = b.basic(p+".branch2.1", b2, 96, win(3, 1, 1))
		b2 = b.basic(p+".branch2.2", b2, 96, win(3, 1, 1))
		b3 := b.avgpool(p+".branch3.0", x, win(3, 1, 1))
		b3 = b.basic(p+".branch3.1", b3, 96, win(1, 1, 0))
		x = b.concat(p+"/concat", b0, b1, b2, b3)
		i++
	}
	{ // Reduction_A
		p := f(i)
		b0 := b.basic(p+".branch0", x, 384, win(3, 2, 0))
		b1 := b.basic(p+".branch1.0", x, 192, win(1, 1, 0))
		b1 = b.basic(p+".branch1.1", b1, 224, win(3, 1, 1))
		b1 = b.basic(p+".branch1.2", b1, 256, win(3, 2, 0))
		b2 := b.maxpool(p+".branch2", x, win(3, 2, 0))
		x = b.concat(p+"/concat", b0, b1, b2)
		i++
	}
	for range 7 { // Inception_B
		p := f(i)
		b0 := b.basic(p+".branch0", x, 384, win(1, 1, 0))
		b1 := b.basic(p+".branch1.0", x, 192, win(1, 1, 0))
		b1 = b.basic(p+".branch1.1", b1, 224, rect(1, 7, 0, 3))
		b1 = b.basic(p+".branch1.2", b1, 256, rect(7, 1, 3, 0))
		b2 := b.basic(p+".branch2.0", x, 192, win(1, 1, 0))
		b2 = b.basic(p+".branch2.1", b2, 192, rect(7, 1, 3, 0))
		b2 = b.basic(p+".branch2.2", b2, 224, rect(1, 7, 0, 3))
		b2 = b.basic(p+".branch2.3", b2, 224, rect(7, 1, 3, 0))
		b2 = b.basic(p+".branch2.4", b2, 256, rect(1, 7, 0, 3))
		b3 := b.avgpool(p+".branch3.0", x, win(3, 1, 1))
		b3 = b.basic(p+".branch3.1", b3, 128, win(1, 1, 0))
		x = b.concat(p+"/concat", b0, b1, b2, b3)
		i++
	}
	{ // Reduction_B
		p := f(i)
		b0 := b.basic(p+".branch0.0", x, 192, win(1, 1, 0))
		b0 = b.basic(p+".branch0.1", b0, 192, win(3, 2, 0))
		b1 := b.basic(p+".branch1.0", x, 256, win(1, 1, 0))
		b1 = b.basic(p+".branch1.1", b1, 256, rect(1, 7, 0, 3))
		b1 = b.basic(p+".branch1.2", b1, 320, rect(7, 1, 3, 0))
		b1 = b.basic(p+".branch1.3", b1, 320, win(3, 2, 0))
		b2 := b.maxpool(p+".branch2", x, win(3, 2, 0))
		x = b.concat(p+"/concat", b0, b1, b2)
		i++
	}
	for range 3 { // Inception_C
		p := f(i)
		b0 := b.basic(p+".branch0", x, 256, win(1, 1, 0))
		b1 := b.basic(p+".branch1_0", x, 384, win(1, 1, 0))
		b1a := b.basic(p+".branch1_1a", b1, 256, rect(1, 3, 0, 1))
		b1b := b.basic(p+".branch1_1b", b1, 256, rect(3, 1, 1, 0))
		b2 := b.basic(p+".branch2_0", x, 384, win(1, 1, 0))
		b2 = b.basic(p+".branch2_1", b2, 448, rect(3, 1, 1, 0))
		b2 = b.basic(p+".branch2_2", b2, 512, rect(1, 3, 0, 1))
		b2a := b.basic(p+".branch2_3a", b2, 256, rect(1, 3, 0, 1))
		b2b := b.basic(p+".branch2_3b", b2, 256, rect(3, 1, 1, 0))
		b3 := b.avgpool(p+".branch3.0", x, win(3, 1, 1))
		b3 = b.basic(p+".branch3.1", b3, 256, win(1, 1, 0))
		b1 = b.concat(p+"/concat_1", b1a, b1b)
		b2 = b.concat(p+"/concat_2", b2a, b2b)
		x = b.concat(p+"/concat", b0, b1, b2, b3)
		i++
	}
	b.head(x, "avg_pool", "flatten", "dropout", "last_linear")
}
