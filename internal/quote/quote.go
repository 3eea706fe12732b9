package quote

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name is s as it is when every rune is printable (letters, digits,
// punctuation, spaces; no quotes or backslashes), else s quoted as a Go
// string, its control characters escaped.
func Name(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' || r == '\\' {
			return strconv.Quote(s)
		}
	}
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// Controls is s with every control character but newline and tab (C0,
// DEL, C1 such as the one-byte CSI) and every invalid UTF-8 byte
// written as a Go escape (\x1b, \u009b, \xff); printable text, newlines
// included, stays as it is. It is the last guard where messages reach
// the terminal.
func Controls(s string) string {
	clean := true
	for _, r := range s {
		if bad(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case bad(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
	}
	return b.String()
}

// bad reports a rune Controls escapes.
func bad(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}
