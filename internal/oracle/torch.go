package oracle

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
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
	return torchGrads(t, name, batch, t.TempDir(), extra)
}

// TorchGrads64 is TorchGrads in double precision: the same weights and
// input values, computed and written as float64. Model is the model as
// PyTorch ran it (float64 weights, dropout 0) exported to a temporary
// ONNX file with the settings of scripts/export_torch_models.py, for a
// runtime to run in double precision too.
func TorchGrads64(t testing.TB, name string, batch int, extra ...string) (model string, inputs, expected map[string]*Tensor) {
	t.Helper()
	dir := t.TempDir()
	model = filepath.Join(dir, name+"-float64.onnx")
	inputs, expected = torchGrads(t, name, batch, dir, append([]string{"--float64", "--export-onnx", model}, extra...))
	if !fileExists(model) {
		t.Fatalf("oracle: scripts/torch_grads.py did not write %s", model)
	}
	return model, inputs, expected
}

func torchGrads(t testing.TB, name string, batch int, dir string, extra []string) (inputs, expected map[string]*Tensor) {
	t.Helper()
	py := pythonTorch(t)
	model := TorchModel(t, name)
	script := filepath.Join(mustRoot(t), "scripts", "torch_grads.py")
	args := append([]string{script, name, dir, "--batch", strconv.Itoa(batch), "--onnx", model}, extra...)
	start := time.Now()
	var buf bytes.Buffer
	cmd := exec.Command(py, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		t.Fatalf("oracle: %s: %v\n%s", cmd, err, lastLines(buf.Bytes(), 40))
	}
	t.Logf("oracle: %s (%v)", bytes.TrimSpace(buf.Bytes()), time.Since(start).Round(time.Millisecond))
	var err error
	if inputs, err = ReadTensors(filepath.Join(dir, "inputs.json")); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if expected, err = ReadTensors(filepath.Join(dir, "expected.json")); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return inputs, expected
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
	py := pythonTorch(t)
	script := filepath.Join(mustRoot(t), "scripts", "torch_saved.py")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, script, name, strconv.Itoa(batch))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("oracle: %s: %v\n%s", cmd, err, lastLines(stderr.Bytes(), 40))
	}
	var res TorchSavedBytes
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("oracle: %s: %v", cmd, err)
	}
	return &res
}
