package units

import "fmt"

// Bytes formats b with a binary prefix and two decimals ("1.22 MiB");
// below 1 KiB it is an exact count ("512 B"). Prefixes stop at PiB.
func Bytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}
