package units

import "testing"

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1280, "1.25 KiB"},
		{1279262, "1.22 MiB"}, {11 << 30, "11.00 GiB"}, {3 << 40, "3.00 TiB"},
		{5 << 50, "5.00 PiB"}, {2048 << 50, "2048.00 PiB"}, {-5, "-5 B"},
	} {
		if got := Bytes(c.in); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}
