package passes

// Options configure the planning pipeline.
type Options struct {
	// Budget is the device memory budget in bytes (0: the device's capacity).
	Budget int64
	// Device is the device profile name or file.
	Device string
}
