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
	// ConvAlgos lists convolution algorithms (moDNN Eq. 5): relative
	// time and workspace as a multiple of the conv's output bytes.
	ConvAlgos []ConvAlgo `json:"conv_algos"`
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
