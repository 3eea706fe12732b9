package profile

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// GiB is 2^30 bytes; GB is 10^9.
const (
	GiB = int64(1) << 30
	GB  = 1e9
)

// Profile is a device and its host link.
type Profile struct {
	Name string `json:"name"`
	// Memory is the device memory capacity in bytes.
	Memory int64 `json:"memory_bytes"`
	// Reserved is memory the framework/driver keeps (context, library
	// handles); the planner's budget defaults to Memory − Reserved.
	Reserved int64 `json:"reserved_bytes"`
	// H2D and D2H are the achievable pinned-copy bandwidths, bytes/s.
	H2D float64 `json:"h2d_bytes_per_s"`
	D2H float64 `json:"d2h_bytes_per_s"`
	// FLOPS is the peak fp32 throughput; Efficiency the fraction large
	// kernels achieve.
	FLOPS      float64 `json:"fp32_flops"`
	Efficiency float64 `json:"efficiency"`
	// MemBW is the device memory bandwidth, bytes/s.
	MemBW float64 `json:"mem_bytes_per_s"`
	// Launch is the fixed cost of one kernel, seconds.
	Launch float64 `json:"launch_s"`
	// HalfWork is the FLOP count at which a kernel reaches half of its
	// large-kernel efficiency: efficiency(w) = Efficiency · w/(w+HalfWork),
	// the drop for small (e.g. split) kernels of TSPLIT Fig. 5.
	HalfWork float64 `json:"half_efficiency_flops"`
	// HostMemory bounds the pinned host memory swapped tensors may use.
	HostMemory int64 `json:"host_memory_bytes"`
	// HostBW is the host's memory-copy bandwidth (bytes/s), for ops that
	// rearrange swapped pieces in host memory (0: 10 GB/s).
	HostBW float64 `json:"host_copy_bytes_per_s,omitempty"`
	// HostFLOPS is the host's fp32 compute rate (FLOP/s) for ops placed
	// on it, such as an optimizer update run by the host (0: 50 GFLOP/s,
	// a few cores' vector units).
	HostFLOPS float64 `json:"host_fp32_flops,omitempty"`
	// ConvAlgos lists convolution algorithms (moDNN Eq. 5): relative
	// time and workspace as a multiple of the conv's output bytes.
	ConvAlgos []ConvAlgo `json:"conv_algos"`

	// LinkLatency is the fixed time of one host↔device copy, seconds,
	// added to its bytes over the bandwidth (0 in the built-in
	// profiles, whose copies are large).
	LinkLatency float64 `json:"link_latency_s,omitempty"`
	// WakeLatency is how long after a task ends a task waiting for it
	// on another stream, or the thread issuing ops, resumes (s): on the
	// CPU device a goroutine blocked on an event waits for a core; a
	// GPU's streams wait for each other's events in hardware (0).
	WakeLatency float64 `json:"wake_latency_s,omitempty"`
	// Emulation, when set, makes this a profile of the CPU device
	// standing in for a GPU: a plan made for it records the link, and
	// the CPU device's copy streams take that long for every copy when
	// the plan runs, so that overlap and stalls happen for real.
	Emulation *Emulation `json:"emulation,omitempty"`
	// OpTimes are measured kernel times in seconds by OpKey (tsplitc
	// profile MODEL): an op whose key is here costs Launch plus its
	// measured time instead of the roofline's estimate.
	OpTimes map[string]float64 `json:"op_times_s,omitempty"`
	// TypeScale corrects the roofline of ops not measured (micro-ops of
	// a split, say) by qualified op type: the ratio of measured to
	// estimated kernel time over the measured ops of that type.
	TypeScale map[string]float64 `json:"op_type_scale,omitempty"`
	// Measured says how a measured profile was made (nil for the
	// built-in ones).
	Measured *Measured `json:"measured,omitempty"`
}

// Measured describes the run a measured profile comes from.
type Measured struct {
	// Model is the model file, Dims its bound dimensions and Runs and
	// Warmup the timed and untimed training steps.
	Model  string           `json:"model"`
	Dims   map[string]int64 `json:"dims"`
	Runs   int              `json:"runs"`
	Warmup int              `json:"warmup"`
	// Device is the runtime device measured.
	Device string `json:"device"`
	// StepS is the median measured step (first op start to last op
	// end) and ComputeS its sum of measured kernel times.
	StepS    float64 `json:"step_s"`
	ComputeS float64 `json:"compute_s"`
	// TailScale is the factor every op's median time was multiplied by
	// so that the step's ops sum to ComputeS: the slow outliers of a
	// loaded machine, spread over every op.
	TailScale float64 `json:"tail_scale"`
	// CopyBytesPerS is the measured host↔device copy bandwidth of the
	// device itself (a memory copy on the CPU device).
	CopyBytesPerS float64 `json:"copy_bytes_per_s"`
}

// Emulation is the host link the CPU device's copy streams emulate.
type Emulation struct {
	// Of names the profile whose link is emulated, and Ratio is its
	// estimate of the measured step's time (its roofline) over the
	// measured time: its bandwidths times Ratio, and its latency over
	// Ratio, give the link on which the CPU device's step transfers as
	// many of its compute-seconds as that device's would.
	Of    string  `json:"of"`
	Ratio float64 `json:"ratio"`
	// H2D, D2H (bytes/s) and Latency (s) are what every copy is paced
	// to.
	H2D     float64 `json:"h2d_bytes_per_s"`
	D2H     float64 `json:"d2h_bytes_per_s"`
	Latency float64 `json:"latency_s"`
	// Overhead is how much longer than that a paced copy was measured
	// to take (a sleeping stream wakes up late): the profile's
	// LinkLatency is Latency plus Overhead.
	Overhead float64 `json:"overhead_s"`
}

// ConvAlgo is one convolution algorithm of a device.
type ConvAlgo struct {
	Name string `json:"name"`
	// Speed is the time relative to the implicit-GEMM algorithm (< 1: faster).
	Speed float64 `json:"relative_time"`
	// Workspace is its scratch as a multiple of the conv's input bytes.
	Workspace float64 `json:"workspace_per_input_byte"`
}

// defaultConvAlgos is a cuDNN-like menu: implicit GEMM needs no
// workspace; explicit GEMM (im2col) and FFT are faster but need scratch.
var defaultConvAlgos = []ConvAlgo{
	{Name: "implicit_gemm", Speed: 1.0, Workspace: 0},
	{Name: "gemm", Speed: 0.8, Workspace: 1.0},
	{Name: "fft", Speed: 0.6, Workspace: 4.0},
}

// Built-in profiles, from vendor specifications: boost fp32 throughput,
// memory bandwidth, and PCIe 3.0 x16 (≈12 GB/s pinned), 4.0 (≈24 GB/s)
// or 5.0 (≈48 GB/s) for the host link. Host memory is that of the
// servers in the papers (TSPLIT: 256 GB with the TITAN RTX, 128 GB with
// the GTX 1080 Ti; Capuchin: 256 GB with the P100).
var builtin = map[string]Profile{
	"titan-rtx":  {Name: "titan-rtx", Memory: 24 * GiB, Reserved: 512 << 20, H2D: 12 * GB, D2H: 12 * GB, FLOPS: 16.3e12, Efficiency: 0.65, MemBW: 672 * GB, Launch: 5e-6, HalfWork: 2e8, HostMemory: 256 * GiB},
	"gtx-1080ti": {Name: "gtx-1080ti", Memory: 11 * GiB, Reserved: 512 << 20, H2D: 12 * GB, D2H: 12 * GB, FLOPS: 11.3e12, Efficiency: 0.65, MemBW: 484 * GB, Launch: 5e-6, HalfWork: 1.5e8, HostMemory: 128 * GiB},
	"p100":       {Name: "p100", Memory: 16 * GiB, Reserved: 512 << 20, H2D: 12 * GB, D2H: 12 * GB, FLOPS: 9.3e12, Efficiency: 0.65, MemBW: 732 * GB, Launch: 5e-6, HalfWork: 1.5e8, HostMemory: 256 * GiB},
	"v100":       {Name: "v100", Memory: 32 * GiB, Reserved: 512 << 20, H2D: 12 * GB, D2H: 12 * GB, FLOPS: 15.7e12, Efficiency: 0.7, MemBW: 900 * GB, Launch: 5e-6, HalfWork: 2e8, HostMemory: 256 * GiB},
	"a100":       {Name: "a100", Memory: 40 * GiB, Reserved: 768 << 20, H2D: 24 * GB, D2H: 24 * GB, FLOPS: 19.5e12, Efficiency: 0.7, MemBW: 1555 * GB, Launch: 4e-6, HalfWork: 3e8, HostMemory: 512 * GiB},
	"h100":       {Name: "h100", Memory: 80 * GiB, Reserved: 1 << 30, H2D: 48 * GB, D2H: 48 * GB, FLOPS: 67e12, Efficiency: 0.7, MemBW: 3350 * GB, Launch: 3e-6, HalfWork: 8e8, HostMemory: 1024 * GiB},
}

// Names lists the built-in profiles.
func Names() []string {
	var out []string
	for n := range builtin {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns a built-in profile by name, or reads a JSON profile
// file when name is a path (contains a slash or ends in .json).
func Lookup(name string) (*Profile, error) {
	if name == "" {
		name = "titan-rtx"
	}
	if p, ok := builtin[name]; ok {
		if p.ConvAlgos == nil {
			p.ConvAlgos = defaultConvAlgos
		}
		return &p, nil
	}
	if strings.Contains(name, "/") || strings.HasSuffix(name, ".json") {
		return Load(name)
	}
	return nil, fmt.Errorf("profile: unknown device %q (built-in: %s; or a JSON profile file)", name, strings.Join(Names(), ", "))
}

// Load reads a measured profile from a JSON file.
func Load(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %v", err)
	}
	var p Profile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("profile: %s: %v", path, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("profile: %s: %v", path, err)
	}
	if p.ConvAlgos == nil {
		p.ConvAlgos = defaultConvAlgos
	}
	return &p, nil
}

// Validate checks that every rate and size is positive.
func (p *Profile) Validate() error {
	switch {
	case p.Memory <= 0:
		return fmt.Errorf("memory_bytes must be positive")
	case p.Reserved < 0 || p.Reserved >= p.Memory:
		return fmt.Errorf("reserved_bytes must be in [0, memory_bytes)")
	case p.H2D <= 0 || p.D2H <= 0:
		return fmt.Errorf("h2d/d2h bandwidths must be positive")
	case p.FLOPS <= 0 || p.Efficiency <= 0 || p.Efficiency > 1:
		return fmt.Errorf("fp32_flops must be positive and efficiency in (0, 1]")
	case p.MemBW <= 0:
		return fmt.Errorf("mem_bytes_per_s must be positive")
	case p.Launch < 0 || p.HalfWork < 0:
		return fmt.Errorf("launch_s and half_efficiency_flops must not be negative")
	case p.HostMemory <= 0:
		return fmt.Errorf("host_memory_bytes must be positive")
	case !(p.HostBW >= 0) || !(p.HostFLOPS >= 0):
		return fmt.Errorf("host_copy_bytes_per_s and host_fp32_flops must not be negative")
	}
	if !(p.LinkLatency >= 0) || !(p.WakeLatency >= 0) {
		return fmt.Errorf("link_latency_s and wake_latency_s must not be negative")
	}
	if e := p.Emulation; e != nil && (!(e.H2D > 0) || !(e.D2H > 0) || !(e.Latency >= 0) || !(e.Overhead >= 0)) {
		return fmt.Errorf("emulation: bandwidths must be positive, latency and overhead not negative")
	}
	for k, t := range p.OpTimes {
		if !(t >= 0) || t > 1e6 {
			return fmt.Errorf("op_times_s[%q]: %v is not a time in seconds", k, t)
		}
	}
	for k, x := range p.TypeScale {
		if !(x > 0) || x > 1e12 {
			return fmt.Errorf("op_type_scale[%q]: %v must be positive", k, x)
		}
	}
	for _, a := range p.ConvAlgos {
		if a.Speed <= 0 || a.Workspace < 0 {
			return fmt.Errorf("conv algorithm %q: relative_time must be positive, workspace not negative", a.Name)
		}
	}
	return nil
}

// Budget is the default memory budget: capacity minus reserved.
func (p *Profile) Budget() int64 { return p.Memory - p.Reserved }
