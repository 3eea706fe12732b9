package quote

import "testing"

func TestName(t *testing.T) {
	cases := map[string]string{
		"conv1":               "conv1",
		"layer1.0/Conv_3:0":   "layer1.0/Conv_3:0",
		"é π":                 "é π",
		"\x1b[2Jgone":         `"\x1b[2Jgone"`,
		`say "hi"`:            `"say \"hi\""`,
		"tab\there":           `"tab\there"`,
		"\xff":                `"\xff"`,
		"title\x1b]0;pwned\a": `"title\x1b]0;pwned\a"`,
	}
	for in, want := range cases {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestControls(t *testing.T) {
	cases := map[string]string{
		"plain message: node \"a\" (Relu)": "plain message: node \"a\" (Relu)",
		"two\nlines\tand a tab":            "two\nlines\tand a tab",
		"red \x1b[31mtext":                 `red \x1b[31mtext`,
		"csi \u009b2J":                     `csi \u009b2J`,
		"bell\a and del\x7f":               `bell\a and del\x7f`,
		"bad utf8 \xff\xfe end":            `bad utf8 \xff\xfe end`,
		"ünïcode ok":                       "ünïcode ok",
	}
	for in, want := range cases {
		if got := Controls(in); got != want {
			t.Errorf("Controls(%q) = %q, want %q", in, got, want)
		}
	}
}
