//go:build !unix

package oracle

// lockFile is a no-op where flock is unavailable; TorchModel still
// serialises exports within one process, and the export script writes each
// file under a temporary name and renames it.
func lockFile(path string) (func(), error) { return func() {}, nil }
