package oracle

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pythonTorch returns the interpreter if torch, torchvision, onnx and
// numpy import in it (what scripts/torch_grads.py and torch_saved.py
// need), skipping the test otherwise.
func pythonTorch(t testing.TB) string {
	t.Helper()
	return pythonWith(t, "torch, torchvision, onnx, numpy")
}

// TorchGrads is PyTorch's training step of the exported model <name>
// at batch (scripts/torch_grads.py): the model is built as
// scripts/export_torch_models.py builds it, its weights are loaded from
// the exported file (TorchModel), it is put in train() mode with every
// dropout probability 0, and the mean cross-entropy of its logits on
// seeded inputs and labels is back-propagated.
//
// Inputs holds the model's input tensor(s), named as the ONNX graph
// inputs, and "labels" (int64, the logits' shape without the class axis).
// Expected holds "loss" (a float32 scalar) and the float32 gradient of
// every parameter, keyed by its ONNX initializer name.
//
// extra is passed to the script: "--seed=S" changes the inputs' seed,
// "--sgd-steps=K" (and "--lr=LR") adds the losses of K SGD steps as
// "sgd_losses".
func TorchGrads(t testing.TB, name string, batch int, extra ...string) (inputs, expected map[string]*Tensor) {
	t.Helper()
	_, inputs, expected = torchGrads(t, name, batch, false, extra)
	return inputs, expected
}

// TorchGrads64 is TorchGrads in double precision: the same weights and
// input values, computed and written as float64. Model is the model as
// PyTorch ran it (float64 weights, dropout 0) exported to an ONNX file
// (in the oracle cache, or a temporary folder: read it, do not change
// it) with the settings of scripts/export_torch_models.py, for a
// runtime to run in double precision too.
func TorchGrads64(t testing.TB, name string, batch int, extra ...string) (model string, inputs, expected map[string]*Tensor) {
	t.Helper()
	return torchGrads(t, name, batch, true, extra)
}

// torchGrads runs scripts/torch_grads.py (cached: see CacheDir) and
// returns the float64 model it exported (float64 only), its inputs and
// its expected values.
func torchGrads(t testing.TB, name string, batch int, float64 bool, extra []string) (model string, inputs, expected map[string]*Tensor) {
	t.Helper()
	onnxModel := TorchModel(t, name)
	k := pythonKey(t, "torch-grads", fmt.Sprintf("PyTorch training step of %s at batch %d", name, batch))
	k.add("name", name)
	k.add("batch", strconv.Itoa(batch))
	k.add("float64", strconv.FormatBool(float64))
	k.add("extra", strings.Join(extra, "\x00"))
	k.model(t, onnxModel)
	exported := name + "-float64.onnx"
	dir := cached(t, k, func(dir string) {
		py := pythonTorch(t)
		script := filepath.Join(mustRoot(t), "scripts", "torch_grads.py")
		args := []string{script, name, dir, "--batch", strconv.Itoa(batch), "--onnx", onnxModel}
		if float64 {
			args = append(args, "--float64", "--export-onnx", filepath.Join(dir, exported))
		}
		args = append(args, extra...)
		start := time.Now()
		var buf bytes.Buffer
		cmd := exec.Command(py, args...)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			t.Fatalf("oracle: %s: %v\n%s", cmd, err, lastLines(buf.Bytes(), 40))
		}
		t.Logf("oracle: %s (%v)", bytes.TrimSpace(buf.Bytes()), time.Since(start).Round(time.Millisecond))
	})
	if float64 {
		model = filepath.Join(dir, exported)
		if !fileExists(model) {
			t.Fatalf("oracle: scripts/torch_grads.py did not write %s", model)
		}
	}
	var err error
	if inputs, err = ReadTensors(filepath.Join(dir, "inputs.json")); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if expected, err = ReadTensors(filepath.Join(dir, "expected.json")); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return model, inputs, expected
}

// TorchSavedTensor is one storage PyTorch saves for backward.
type TorchSavedTensor struct {
	Node   string   `json:"node"` // autograd node type, e.g. ConvolutionBackward0
	Attr   string   `json:"attr"` // its attribute, e.g. _saved_input
	DType  string   `json:"dtype"`
	Shape  []int64  `json:"shape"`
	Bytes  int64    `json:"bytes"`
	Shared []string `json:"shared"` // other nodes saving the same storage
}

// TorchSavedOp totals what the nodes of one autograd node type save.
type TorchSavedOp struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
}

// TorchSavedBytes is what PyTorch keeps for backward in one training
// step (scripts/torch_saved.py).
type TorchSavedBytes struct {
	Model string `json:"model"`
	Batch int    `json:"batch"`
	// Bytes is the size of the distinct storages the saved-tensor pack
	// hook sees, parameters and buffers excluded; Tensors their number.
	Bytes       int64 `json:"bytes"`
	Tensors     int   `json:"tensors"`
	TensorBytes int64 `json:"tensor_bytes"`
	// ExcludedBytes is the parameters' and buffers' share.
	ExcludedBytes int64 `json:"excluded_bytes"`
	// GraphBytes is the total of ByOp, found by walking the autograd
	// graph; it should equal Bytes.
	GraphBytes int64                   `json:"graph_bytes"`
	ByOp       map[string]TorchSavedOp `json:"by_op"`
	Saved      []TorchSavedTensor      `json:"saved"`
}

// TorchSaved measures the bytes PyTorch saves for backward for the model
// <name> of scripts/export_torch_models.py at batch, in train() mode with
// a mean cross-entropy loss (scripts/torch_saved.py).
func TorchSaved(t testing.TB, name string, batch int) *TorchSavedBytes {
	t.Helper()
	k := pythonKey(t, "torch-saved", fmt.Sprintf("PyTorch saved tensors of %s at batch %d", name, batch))
	k.add("name", name)
	k.add("batch", strconv.Itoa(batch))
	dir := cached(t, k, func(dir string) {
		py := pythonTorch(t)
		script := filepath.Join(mustRoot(t), "scripts", "torch_saved.py")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(py, script, name, strconv.Itoa(batch))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("oracle: %s: %v\n%s", cmd, err, lastLines(stderr.Bytes(), 40))
		}
		if err := os.WriteFile(filepath.Join(dir, "saved.json"), stdout.Bytes(), 0o644); err != nil {
			t.Fatalf("oracle: %v", err)
		}
	})
	var res TorchSavedBytes
	readJSON(t, filepath.Join(dir, "saved.json"), &res)
	return &res
}
