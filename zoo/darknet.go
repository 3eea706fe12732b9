package zoo

import "fmt"

// DarkNet-19 (YOLO9000, Table 6): 3×3 convolutions, doubling channels
// after each 2×2 max pool, with 1×1 convolutions halving them between
// the 3×3 ones; a 1×1 convolution to the classes and a global average
// pool. "Like" DarkNet-19: the convolutions have biases and no batch
// normalization, because a training-mode BatchNormalization reads the
// whole image for its statistics and so cannot run on tiles (SFT trains
// DarkNet-19 on fused tiles; docs/sft.md). LeakyReLU slope 0.1 as in
// darknet.

// darknet19Cfg lists the convolutions (output channels, kernel); 0 is a
// max pool.
var darknet19Cfg = [][2]int64{
	{32, 3}, {0, 0},
	{64, 3}, {0, 0},
	{128, 3}, {64, 1}, {128, 3}, {0, 0},
	{256, 3}, {128, 1}, {256, 3}, {0, 0},
	{512, 3}, {256, 1}, {512, 3}, {256, 1}, {512, 3}, {0, 0},
	{1024, 3}, {512, 1}, {1024, 3}, {512, 1}, {1024, 3},
}

func buildDarkNet19(b *builder) {
	x := b.cnnInput()
	for i, c := range darknet19Cfg {
		name := fmt.Sprintf("layers.%d", i)
		if c[0] == 0 {
			x = b.maxpool(name, x, win(2, 2, 0))
			continue
		}
		x = b.conv(name+".conv", x, b.ch(c[0]), win(c[1], 1, c[1]/2), true)
		x.x = b.op("LeakyRelu", name+".act", []string{x.x}, aFloat("alpha", 0.1))
	}
	x = b.conv("classifier", x, b.cfg.Classes, win(1, 1, 0), true)
	y := b.op("GlobalAveragePool", "pool", []string{x.x})
	y = b.op("Flatten", "flatten", []string{y}, aInt("axis", 1))
	b.output(y, b.batchDim(), b.cfg.Classes)
}
