package ir

import "testing"

func TestConvShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "pads1", typ: "Conv", ins: fIns(shp(1, 3, 32, 32), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("pads", 1, 1, 1, 1)}, want: []Shape{shp(1, 8, 32, 32)}, wantDT: []DType{Float}},
		{name: "stride2", typ: "Conv", ins: fIns(shp(1, 3, 32, 32), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2)}, want: []Shape{shp(1, 8, 15, 15)}},
		{name: "stride2_pads1", typ: "Conv", ins: fIns(shp(1, 3, 32, 32), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("pads", 1, 1, 1, 1)}, want: []Shape{shp(1, 8, 16, 16)}},
		{name: "asymmetric_pads", typ: "Conv", ins: fIns(shp(1, 3, 10, 10), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("pads", 0, 2, 1, 0)}, want: []Shape{shp(1, 8, 9, 10)}},
		{name: "same_upper", typ: "Conv", ins: fIns(shp(1, 3, 33, 33), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrS("auto_pad", "SAME_UPPER")}, want: []Shape{shp(1, 8, 17, 17)}},
		{name: "same_lower", typ: "Conv", ins: fIns(shp(1, 3, 10, 11), shp(8, 3, 4, 4)),
			attrs: []Attr{attrS("auto_pad", "SAME_LOWER")}, want: []Shape{shp(1, 8, 10, 11)}},
		{name: "valid", typ: "Conv", ins: fIns(shp(1, 3, 10, 10), shp(8, 3, 5, 5)),
			attrs: []Attr{attrIs("strides", 2, 2), attrS("auto_pad", "VALID")}, want: []Shape{shp(1, 8, 3, 3)}},
		{name: "notset_explicit", typ: "Conv", ins: fIns(shp(1, 3, 10, 10), shp(8, 3, 5, 5)),
			attrs: []Attr{attrS("auto_pad", "NOTSET"), attrIs("pads", 2, 2, 2, 2)}, want: []Shape{shp(1, 8, 10, 10)}},
		{name: "dilation2", typ: "Conv", ins: fIns(shp(1, 3, 10, 10), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("dilations", 2, 2)}, want: []Shape{shp(1, 8, 6, 6)}},
		{name: "dilation_same", typ: "Conv", ins: fIns(shp(1, 3, 10, 10), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("dilations", 2, 2), attrS("auto_pad", "SAME_UPPER")}, want: []Shape{shp(1, 8, 10, 10)}},
		{name: "depthwise", typ: "Conv", ins: fIns(shp(2, 32, 16, 16), shp(32, 1, 3, 3), shp(32)),
			attrs: []Attr{attrI("group", 32), attrIs("pads", 1, 1, 1, 1)}, want: []Shape{shp(2, 32, 16, 16)}},
		{name: "group4", typ: "Conv", ins: fIns(shp(1, 8, 10, 10), shp(16, 2, 3, 3)),
			attrs: []Attr{attrI("group", 4)}, want: []Shape{shp(1, 16, 8, 8)}},
		{name: "conv1d", typ: "Conv", ins: fIns(shp(4, 16, 100), shp(32, 16, 5)),
			attrs: []Attr{attrIs("strides", 2)}, want: []Shape{shp(4, 32, 48)}},
		{name: "conv3d", typ: "Conv", ins: fIns(shp(1, 2, 8, 16, 16), shp(4, 2, 3, 3, 3)),
			attrs: []Attr{attrIs("pads", 1, 1, 1, 1, 1, 1), attrIs("strides", 1, 2, 2)}, want: []Shape{shp(1, 4, 8, 8, 8)}},
		{name: "kernel_shape_attr", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(4, 3, 3, 3)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3)}, want: []Shape{shp(1, 4, 6, 6)}},

		{name: "err_channels", typ: "Conv", ins: fIns(shp(1, 4, 8, 8), shp(8, 3, 3, 3)), err: "input 0 has 4 channels"},
		{name: "err_group_divides", typ: "Conv", ins: fIns(shp(1, 4, 8, 8), shp(6, 1, 3, 3)),
			attrs: []Attr{attrI("group", 4)}, err: "not divisible by group 4"},
		{name: "err_group_zero", typ: "Conv", ins: fIns(shp(1, 4, 8, 8), shp(6, 1, 3, 3)),
			attrs: []Attr{attrI("group", 0)}, err: "group is 0"},
		{name: "err_kernel_too_big", typ: "Conv", ins: fIns(shp(1, 3, 2, 2), shp(8, 3, 3, 3)), err: "exceeds the padded input"},
		{name: "err_auto_pad", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrS("auto_pad", "SAME")}, err: "auto_pad"},
		{name: "err_pads_and_auto_pad", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrS("auto_pad", "SAME_UPPER"), attrIs("pads", 1, 1, 1, 1)}, err: "cannot be used together"},
		{name: "err_bias", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3), shp(4)), err: "input 2 (B)"},
		{name: "err_kernel_shape", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("kernel_shape", 5, 5)}, err: "kernel_shape"},
		{name: "err_rank", typ: "Conv", ins: fIns(shp(3, 8), shp(8, 3)), err: "at least 3"},
		{name: "err_w_rank", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3)), err: "input 1 (W) has rank 3"},
		{name: "err_strides_len", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("strides", 2)}, err: "strides has 1 values, want 2"},
		{name: "err_stride_zero", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("strides", 1, 0)}, err: "must be positive"},
		{name: "err_neg_pads", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrIs("pads", -1, 0, 0, 0)}, err: "pads has -1"},
		{name: "err_dtype", typ: "Conv", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(1, 3, 8, 8), b.in(Float16, 8, 3, 3, 3)}
		}, err: "must match"},
		{name: "err_attr_type", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrI("strides", 2)}, err: "attribute \"strides\" is int, want ints"},
		{name: "err_unknown_attr", typ: "Conv", ins: fIns(shp(1, 3, 8, 8), shp(8, 3, 3, 3)),
			attrs: []Attr{attrI("ceil_mode", 1)}, err: "unknown attribute"},
	})
}

func TestConvTransposeShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "stride2_pads1", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 4, 4)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("pads", 1, 1, 1, 1)}, want: []Shape{shp(1, 8, 16, 16)}},
		{name: "output_padding", typ: "ConvTranspose", ins: fIns(shp(1, 16, 7, 7), shp(16, 8, 3, 3), shp(8)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("pads", 1, 1, 1, 1), attrIs("output_padding", 1, 1)},
			want:  []Shape{shp(1, 8, 14, 14)}},
		{name: "output_shape", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("output_shape", 17, 16)}, want: []Shape{shp(1, 8, 17, 16)}},
		{name: "output_shape_full", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("output_shape", 1, 8, 17, 16)}, want: []Shape{shp(1, 8, 17, 16)}},
		{name: "same_upper", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 9), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrS("auto_pad", "SAME_UPPER")}, want: []Shape{shp(1, 8, 16, 18)}},
		{name: "valid", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrS("auto_pad", "VALID")}, want: []Shape{shp(1, 8, 17, 17)}},
		{name: "group2", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 4, 3, 3)),
			attrs: []Attr{attrI("group", 2)}, want: []Shape{shp(1, 8, 10, 10)}},
		{name: "dilation2", typ: "ConvTranspose", ins: fIns(shp(1, 4, 5, 5), shp(4, 2, 3, 3)),
			attrs: []Attr{attrIs("dilations", 2, 2)}, want: []Shape{shp(1, 2, 9, 9)}},
		{name: "conv1d", typ: "ConvTranspose", ins: fIns(shp(2, 4, 10), shp(4, 3, 5)),
			attrs: []Attr{attrIs("strides", 3)}, want: []Shape{shp(2, 3, 32)}},
		{name: "err_channels", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(8, 8, 3, 3)), err: "input 0 has 16 channels"},
		{name: "err_output_padding", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("strides", 2, 2), attrIs("output_padding", 2, 0)}, err: "output_padding"},
		{name: "err_output_shape_len", typ: "ConvTranspose", ins: fIns(shp(1, 16, 8, 8), shp(16, 8, 3, 3)),
			attrs: []Attr{attrIs("output_shape", 16)}, err: "output_shape has 1 values"},
		{name: "err_negative", typ: "ConvTranspose", ins: fIns(shp(1, 16, 1, 1), shp(16, 8, 1, 1)),
			attrs: []Attr{attrIs("pads", 1, 1, 1, 1)}, err: "negative"},
	})
}

func TestPoolShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "maxpool_resnet", typ: "MaxPool", ins: fIns(shp(1, 64, 112, 112)), nout: 2,
			attrs:  []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2), attrIs("pads", 1, 1, 1, 1)},
			want:   []Shape{shp(1, 64, 56, 56), shp(1, 64, 56, 56)},
			wantDT: []DType{Float, Int64}},
		{name: "maxpool_floor", typ: "MaxPool", ins: fIns(shp(1, 1, 5, 5)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrIs("strides", 2, 2)}, want: []Shape{shp(1, 1, 2, 2)}},
		{name: "maxpool_ceil", typ: "MaxPool", ins: fIns(shp(1, 1, 5, 5)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrIs("strides", 2, 2), attrI("ceil_mode", 1)}, want: []Shape{shp(1, 1, 3, 3)}},
		// ceil would give 4, but the last window would start in the right
		// padding and is dropped (PyTorch / onnxruntime rule).
		{name: "maxpool_ceil_drops_pad_window", typ: "MaxPool", ins: fIns(shp(1, 1, 5, 6)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrIs("strides", 2, 2), attrIs("pads", 1, 1, 1, 1), attrI("ceil_mode", 1)},
			want:  []Shape{shp(1, 1, 3, 4)}},
		{name: "maxpool_dilation", typ: "MaxPool", ins: fIns(shp(1, 1, 10, 10)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("dilations", 2, 2)}, want: []Shape{shp(1, 1, 6, 6)}},
		{name: "maxpool_same_upper", typ: "MaxPool", ins: fIns(shp(1, 1, 7, 8)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2), attrS("auto_pad", "SAME_UPPER")}, want: []Shape{shp(1, 1, 4, 4)}},
		{name: "maxpool_valid", typ: "MaxPool", ins: fIns(shp(1, 1, 7, 8)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2), attrS("auto_pad", "VALID")}, want: []Shape{shp(1, 1, 3, 3)}},
		{name: "maxpool_valid_ceil", typ: "MaxPool", ins: fIns(shp(1, 1, 7, 8)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2), attrS("auto_pad", "VALID"), attrI("ceil_mode", 1)},
			want:  []Shape{shp(1, 1, 3, 4)}},
		{name: "maxpool_1d", typ: "MaxPool", ins: fIns(shp(2, 3, 9)),
			attrs: []Attr{attrIs("kernel_shape", 3), attrIs("strides", 3)}, want: []Shape{shp(2, 3, 3)}},
		{name: "maxpool_3d", typ: "MaxPool", ins: fIns(shp(1, 2, 4, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2, 2), attrIs("strides", 2, 2, 2)}, want: []Shape{shp(1, 2, 2, 4, 4)}},
		{name: "maxpool_storage_order", typ: "MaxPool", ins: fIns(shp(1, 1, 4, 4)), nout: 2,
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrI("storage_order", 1)}, want: []Shape{shp(1, 1, 3, 3), shp(1, 1, 3, 3)}},
		{name: "avgpool_count_include_pad", typ: "AveragePool", ins: fIns(shp(1, 3, 7, 7)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("pads", 1, 1, 1, 1), attrI("count_include_pad", 1)}, want: []Shape{shp(1, 3, 7, 7)}},
		{name: "avgpool_ceil", typ: "AveragePool", ins: fIns(shp(1, 3, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2), attrI("ceil_mode", 1)}, want: []Shape{shp(1, 3, 4, 4)}},
		{name: "avgpool_floor", typ: "AveragePool", ins: fIns(shp(1, 3, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 3, 3), attrIs("strides", 2, 2)}, want: []Shape{shp(1, 3, 3, 3)}},
		{name: "avgpool_dilations_opset19", opset: 19, typ: "AveragePool", ins: fIns(shp(1, 3, 9, 9)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrIs("dilations", 3, 3)}, want: []Shape{shp(1, 3, 6, 6)}},
		{name: "lppool", typ: "LpPool", ins: fIns(shp(1, 3, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrIs("strides", 2, 2), attrI("p", 3)}, want: []Shape{shp(1, 3, 4, 4)}},
		{name: "err_no_kernel", typ: "MaxPool", ins: fIns(shp(1, 3, 8, 8)), err: "kernel_shape is required"},
		{name: "err_kernel_rank", typ: "AveragePool", ins: fIns(shp(1, 3, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 2)}, err: "kernel_shape has 1 values"},
		{name: "err_ceil_mode", typ: "MaxPool", ins: fIns(shp(1, 3, 8, 8)),
			attrs: []Attr{attrIs("kernel_shape", 2, 2), attrI("ceil_mode", 2)}, err: "ceil_mode"},
		{name: "err_maxpool_outputs", typ: "MaxPool", ins: fIns(shp(1, 3, 8, 8)), nout: 3,
			attrs: []Attr{attrIs("kernel_shape", 2, 2)}, err: "outputs"},

		{name: "global_avg", typ: "GlobalAveragePool", ins: fIns(shp(2, 64, 7, 7)), want: []Shape{shp(2, 64, 1, 1)}},
		{name: "global_max_1d", typ: "GlobalMaxPool", ins: fIns(shp(2, 3, 10)), want: []Shape{shp(2, 3, 1)}},
		{name: "global_max_3d", typ: "GlobalMaxPool", ins: fIns(shp(2, 3, 4, 5, 6)), want: []Shape{shp(2, 3, 1, 1, 1)}},
		{name: "global_err", typ: "GlobalAveragePool", ins: fIns(shp(5)), err: "at least 2"},
	})
}

func TestNormShapes(t *testing.T) {
	bn := func(x Shape, c int64) func(b *tgraph) []*Value {
		return fIns(x, shp(c), shp(c), shp(c), shp(c))
	}
	runOpCases(t, []opCase{
		{name: "bn_inference", opset: 15, typ: "BatchNormalization", ins: bn(shp(2, 16, 8, 8), 16),
			want: []Shape{shp(2, 16, 8, 8)}},
		{name: "bn_training_opset15", opset: 15, typ: "BatchNormalization", ins: bn(shp(2, 16, 8, 8), 16),
			attrs: []Attr{attrI("training_mode", 1), attrF("momentum", 0.9)},
			want:  []Shape{shp(2, 16, 8, 8), shp(16), shp(16)}},
		{name: "bn_5_outputs_opset12", opset: 12, typ: "BatchNormalization", ins: bn(shp(4, 3, 5), 3),
			attrs: []Attr{attrF("epsilon", 1e-3)},
			want:  []Shape{shp(4, 3, 5), shp(3), shp(3), shp(3), shp(3)}},
		{name: "bn_rank2", opset: 17, typ: "BatchNormalization", ins: bn(shp(4, 3), 3), want: []Shape{shp(4, 3)}},
		{name: "bn_err_5_outputs_opset14", opset: 14, typ: "BatchNormalization", ins: bn(shp(4, 3, 5), 3), nout: 5,
			err: "at most 3"},
		{name: "bn_err_stats_without_training", opset: 15, typ: "BatchNormalization", ins: bn(shp(4, 3, 5), 3), nout: 3,
			err: "training_mode=1"},
		{name: "bn_err_scale", typ: "BatchNormalization", ins: fIns(shp(2, 16, 8, 8), shp(8), shp(16), shp(16), shp(16)),
			err: "input 1 (scale) has shape [8], want [16]"},
		{name: "bn_err_training_old_opset", opset: 12, typ: "BatchNormalization", ins: bn(shp(4, 3, 5), 3),
			attrs: []Attr{attrI("training_mode", 1)}, err: "opset 14"},

		{name: "instnorm", typ: "InstanceNormalization", ins: fIns(shp(2, 4, 8, 8), shp(4), shp(4)), want: []Shape{shp(2, 4, 8, 8)}},

		{name: "ln_last_axis", typ: "LayerNormalization", ins: fIns(shp(2, 5, 64), shp(64), shp(64)), nout: 3,
			want: []Shape{shp(2, 5, 64), shp(2, 5, 1), shp(2, 5, 1)}, wantDT: []DType{Float, Float, Float}},
		{name: "ln_axis1", typ: "LayerNormalization", ins: fIns(shp(2, 5, 64), shp(5, 64)), nout: 3,
			attrs: []Attr{attrI("axis", 1), attrF("epsilon", 1e-6)},
			want:  []Shape{shp(2, 5, 64), shp(2, 1, 1), shp(2, 1, 1)}},
		{name: "ln_fp16_stash_float", typ: "LayerNormalization", ins: func(b *tgraph) []*Value {
			return []*Value{b.in(Float16, 3, 8), b.in(Float16, 8)}
		}, nout: 2, want: []Shape{shp(3, 8), shp(3, 1)}, wantDT: []DType{Float16, Float}},
		{name: "ln_stash_double", typ: "LayerNormalization", ins: fIns(shp(3, 8), shp(8)), nout: 3,
			attrs: []Attr{attrI("stash_type", int64(Double))}, want: []Shape{shp(3, 8), shp(3, 1), shp(3, 1)},
			wantDT: []DType{Float, Double, Double}},
		{name: "ln_err_scale", typ: "LayerNormalization", ins: fIns(shp(2, 5, 64), shp(32)), err: "input 1"},
		{name: "ln_err_axis", typ: "LayerNormalization", ins: fIns(shp(2, 5, 64), shp(64)),
			attrs: []Attr{attrI("axis", 3)}, err: "axis 3 is out of range"},
	})
}

func TestSoftmaxDropoutShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "softmax13", opset: 13, typ: "Softmax", ins: fIns(shp(2, 4, 8)), want: []Shape{shp(2, 4, 8)}},
		{name: "softmax11_default_axis1", opset: 11, typ: "Softmax", ins: fIns(shp(2, 4, 8)), want: []Shape{shp(2, 4, 8)}},
		{name: "logsoftmax_neg_axis", typ: "LogSoftmax", ins: fIns(shp(2, 4, 8)), attrs: []Attr{attrI("axis", -3)}, want: []Shape{shp(2, 4, 8)}},
		{name: "softmax_err_axis", typ: "Softmax", ins: fIns(shp(2, 4, 8)), attrs: []Attr{attrI("axis", 3)}, err: "axis 3 is out of range"},
		{name: "softmax11_err_rank1", opset: 11, typ: "Softmax", ins: fIns(shp(5)), err: "axis 1 is out of range"},
		{name: "hardmax", typ: "Hardmax", ins: fIns(shp(3, 7)), want: []Shape{shp(3, 7)}},

		{name: "dropout10_attr", opset: 11, typ: "Dropout", ins: fIns(shp(2, 8)), nout: 2,
			attrs: []Attr{attrF("ratio", 0.1)}, want: []Shape{shp(2, 8), shp(2, 8)}, wantDT: []DType{Float, Bool}},
		{name: "dropout13_inputs", opset: 13, typ: "Dropout", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 8), b.fconst(Shape{}, 0.2), b.init(TensorFromInt64s(Bool, Shape{}, []int64{1}))}
		}, nout: 2, attrs: []Attr{attrI("seed", 7)}, want: []Shape{shp(2, 8), shp(2, 8)}, wantDT: []DType{Float, Bool}},
		{name: "dropout_err_ratio_type", opset: 13, typ: "Dropout", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 8), b.i64(0)}
		}, err: "input 1 (ratio)"},
		{name: "dropout_err_both_ratios", opset: 13, typ: "Dropout", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 8), b.fconst(Shape{}, 0.2)}
		}, attrs: []Attr{attrF("ratio", 0.1)}, err: "both"},
	})
}

func TestMatMulGemmShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "gemm", typ: "Gemm", ins: fIns(shp(4, 8), shp(8, 16)), want: []Shape{shp(4, 16)}},
		{name: "gemm_transA", typ: "Gemm", ins: fIns(shp(8, 4), shp(8, 16)), attrs: []Attr{attrI("transA", 1)}, want: []Shape{shp(4, 16)}},
		{name: "gemm_transB_bias", typ: "Gemm", ins: fIns(shp(1, 512), shp(1000, 512), shp(1000)),
			attrs: []Attr{attrI("transB", 1), attrF("alpha", 1), attrF("beta", 1)}, want: []Shape{shp(1, 1000)}},
		{name: "gemm_bias_col", typ: "Gemm", ins: fIns(shp(4, 8), shp(8, 16), shp(4, 1)), want: []Shape{shp(4, 16)}},
		{name: "gemm_bias_scalar", typ: "Gemm", ins: fIns(shp(4, 8), shp(8, 16), shp()), want: []Shape{shp(4, 16)}},
		{name: "gemm_err_k", typ: "Gemm", ins: fIns(shp(4, 8), shp(9, 16)), err: "inner dimensions differ"},
		{name: "gemm_err_bias", typ: "Gemm", ins: fIns(shp(4, 8), shp(8, 16), shp(3, 16)), err: "input 2 (C)"},
		{name: "gemm_err_rank", typ: "Gemm", ins: fIns(shp(2, 4, 8), shp(8, 16)), err: "2-D"},

		{name: "matmul_2d", typ: "MatMul", ins: fIns(shp(3, 4), shp(4, 5)), want: []Shape{shp(3, 5)}},
		{name: "matmul_vec_mat", typ: "MatMul", ins: fIns(shp(4), shp(4, 5)), want: []Shape{shp(5)}},
		{name: "matmul_mat_vec", typ: "MatMul", ins: fIns(shp(3, 4), shp(4)), want: []Shape{shp(3)}},
		{name: "matmul_vec_vec", typ: "MatMul", ins: fIns(shp(4), shp(4)), want: []Shape{shp()}},
		{name: "matmul_batched_vec", typ: "MatMul", ins: fIns(shp(2, 3, 4), shp(4)), want: []Shape{shp(2, 3)}},
		{name: "matmul_vec_batched", typ: "MatMul", ins: fIns(shp(4), shp(2, 4, 5)), want: []Shape{shp(2, 5)}},
		{name: "matmul_broadcast", typ: "MatMul", ins: fIns(shp(2, 1, 3, 4), shp(5, 4, 6)), want: []Shape{shp(2, 5, 3, 6)}},
		{name: "matmul_attention", typ: "MatMul", ins: fIns(shp(8, 12, 128, 64), shp(8, 12, 64, 128)), want: []Shape{shp(8, 12, 128, 128)}},
		{name: "matmul_err_inner", typ: "MatMul", ins: fIns(shp(8, 64), shp(32, 10)), err: "matching inner dimensions: 64 vs 32"},
		{name: "matmul_err_batch", typ: "MatMul", ins: fIns(shp(2, 3, 4), shp(3, 4, 5)), err: "batch dimensions"},
		{name: "matmul_err_scalar", typ: "MatMul", ins: fIns(shp(), shp(3)), err: "at least 1-D"},
	})
}
