package filecheck

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kind is a directive's kind.
type Kind uint8

// Directive kinds.
const (
	Check Kind = iota
	CheckNext
	CheckNot
	CheckError
)

var kindNames = [...]string{"CHECK", "CHECK-NEXT", "CHECK-NOT", "CHECK-ERROR"}

func (k Kind) String() string { return kindNames[k] }

// Directive is one expectation.
type Directive struct {
	Kind    Kind
	Pattern string // as written, trimmed
	Line    int    // in the test file
	parts   []part
}

// part is a piece of a pattern: literal text, a regex, a variable bound
// by this match (def) or one bound before (use).
type part struct {
	kind  byte // 'l' literal, 'r' regex, 'd' definition, 'u' use
	text  string
	name  string
	regex string
}

// Script is the directives of one test file.
type Script struct {
	Path string
	// Run is the text of the RUN line, RunLine its line (0: none).
	Run     string
	RunLine int
	// SameAsInput is the line of CHECK-SAME-AS-INPUT (0: none).
	SameAsInput int
	// Checks are the CHECK, CHECK-NEXT and CHECK-NOT directives in
	// file order (a CHECK-COUNT-n appears as n CHECKs).
	Checks []Directive
	// Errors are the CHECK-ERROR directives.
	Errors []Directive
}

var directiveRE = regexp.MustCompile(`^#\s*((?:RUN|CHECK)[A-Z0-9-]*)(:?)(.*)$`)

// Parse reads the directives of a test file. Comment lines that are not
// directives are skipped; a word that looks like a directive but is not
// one (CHECK-NXT:) is an error, as is a file that expects nothing.
func Parse(path string, src []byte) (*Script, error) {
	s := &Script{Path: path}
	for i, raw := range strings.Split(string(src), "\n") {
		line := i + 1
		m := directiveRE.FindStringSubmatch(strings.TrimSpace(raw))
		if m == nil {
			continue
		}
		word, colon, rest := m[1], m[2], strings.TrimSpace(m[3])
		errf := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
		}
		if word == "CHECK-SAME-AS-INPUT" {
			if colon != "" && rest != "" || colon == "" && rest != "" {
				return nil, errf("CHECK-SAME-AS-INPUT takes no pattern")
			}
			s.SameAsInput = line
			continue
		}
		if colon == "" {
			if word == "RUN" || word == "CHECK" || strings.HasPrefix(word, "CHECK-") {
				return nil, errf("%s needs a colon and a pattern", word)
			}
			continue
		}
		if rest == "" {
			return nil, errf("%s: empty pattern", word)
		}
		add := func(k Kind) error {
			d := Directive{Kind: k, Pattern: rest, Line: line}
			var err error
			if d.parts, err = compile(rest); err != nil {
				return errf("%s: %v", word, err)
			}
			if k == CheckError {
				s.Errors = append(s.Errors, d)
			} else {
				s.Checks = append(s.Checks, d)
			}
			return nil
		}
		var err error
		switch {
		case word == "RUN":
			if s.RunLine != 0 {
				return nil, errf("a second RUN line (the first is line %d)", s.RunLine)
			}
			s.Run, s.RunLine = rest, line
		case word == "CHECK":
			err = add(Check)
		case word == "CHECK-NEXT":
			if len(s.Checks) == 0 || s.Checks[len(s.Checks)-1].Kind == CheckNot {
				return nil, errf("CHECK-NEXT must follow a CHECK, CHECK-NEXT or CHECK-COUNT")
			}
			err = add(CheckNext)
		case word == "CHECK-NOT":
			err = add(CheckNot)
		case word == "CHECK-ERROR":
			err = add(CheckError)
		case strings.HasPrefix(word, "CHECK-COUNT-"):
			n, perr := strconv.Atoi(strings.TrimPrefix(word, "CHECK-COUNT-"))
			if perr != nil || n < 1 {
				return nil, errf("%s: the count must be a positive integer", word)
			}
			for range n {
				if err = add(Check); err != nil {
					break
				}
			}
		default:
			return nil, errf("unknown directive %s", word)
		}
		if err != nil {
			return nil, err
		}
	}
	if s.RunLine == 0 {
		return nil, fmt.Errorf("%s: no RUN line", path)
	}
	if len(s.Checks) == 0 && len(s.Errors) == 0 && s.SameAsInput == 0 {
		return nil, fmt.Errorf("%s: no CHECK, CHECK-ERROR or CHECK-SAME-AS-INPUT: the test would assert nothing", path)
	}
	if len(s.Errors) > 0 && (len(s.Checks) > 0 || s.SameAsInput != 0) {
		return nil, fmt.Errorf("%s:%d: CHECK-ERROR cannot be mixed with checks of the output", path, s.Errors[0].Line)
	}
	return s, nil
}

// compile splits a pattern into parts and checks its regexes.
func compile(p string) ([]part, error) {
	var parts []part
	lit := func(s string) {
		if s != "" {
			parts = append(parts, part{kind: 'l', text: s})
		}
	}
	for p != "" {
		i := strings.Index(p, "{{")
		j := strings.Index(p, "[[")
		switch {
		case i < 0 && j < 0:
			lit(p)
			p = ""
		case i >= 0 && (j < 0 || i < j):
			end := strings.Index(p[i+2:], "}}")
			if end < 0 {
				return nil, fmt.Errorf("unterminated {{ in %q", p)
			}
			// In "}}}" the last two close the block: {{x{4}}} is x{4}.
			for i+2+end+2 < len(p) && p[i+2+end+2] == '}' {
				end++
			}
			re := p[i+2 : i+2+end]
			if _, err := regexp.Compile(re); err != nil {
				return nil, fmt.Errorf("bad regex {{%s}}: %v", re, err)
			}
			lit(p[:i])
			parts = append(parts, part{kind: 'r', regex: re})
			p = p[i+2+end+2:]
		default:
			// The first "]]" after which the body's regex compiles ends
			// it, so [[N:%[0-9]]] reads as N and %[0-9].
			end := -1
			for k := j + 2; k+2 <= len(p); k++ {
				if p[k:k+2] != "]]" {
					continue
				}
				if _, re, ok := strings.Cut(p[j+2:k], ":"); !ok || compiles(re) {
					end = k - (j + 2)
					break
				}
			}
			if end < 0 {
				return nil, fmt.Errorf("unterminated or bad [[…]] in %q", p)
			}
			body := p[j+2 : j+2+end]
			lit(p[:j])
			name, re, def := strings.Cut(body, ":")
			if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(name) {
				return nil, fmt.Errorf("bad variable name %q", name)
			}
			if def {
				if _, err := regexp.Compile(re); err != nil {
					return nil, fmt.Errorf("bad regex in [[%s]]: %v", body, err)
				}
				parts = append(parts, part{kind: 'd', name: name, regex: re})
			} else {
				parts = append(parts, part{kind: 'u', name: name})
			}
			p = p[j+2+end+2:]
		}
	}
	return parts, nil
}

func compiles(re string) bool {
	_, err := regexp.Compile(re)
	return err == nil
}

var spaces = regexp.MustCompile(`[ \t]+`)

// regex builds the directive's regexp with the variables bound so far.
// A use of a variable defined earlier in the same pattern (RE2 has no
// backreferences) becomes a copy of the definition's regex; match then
// requires the two to have matched the same text.
func (d *Directive) regex(vars map[string]string) (*regexp.Regexp, error) {
	var b strings.Builder
	local := map[string]string{} // defined in this pattern: name → regex
	for _, p := range d.parts {
		switch p.kind {
		case 'l':
			for k, w := range spaces.Split(p.text, -1) {
				if k > 0 {
					b.WriteString(`[ \t]+`)
				}
				b.WriteString(regexp.QuoteMeta(w))
			}
		case 'r':
			b.WriteString("(?:" + p.regex + ")")
		case 'd':
			b.WriteString("(" + p.regex + ")")
			local[p.name] = p.regex
		case 'u':
			if re, ok := local[p.name]; ok {
				b.WriteString("(" + re + ")")
				continue
			}
			v, ok := vars[p.name]
			if !ok {
				return nil, fmt.Errorf("variable %s is used before a match binds it", p.name)
			}
			b.WriteString(regexp.QuoteMeta(v))
		}
	}
	return regexp.Compile(b.String())
}

// match tries the directive on one line and returns the bindings.
func (d *Directive) match(line string, vars map[string]string) (bool, map[string]string, error) {
	re, err := d.regex(vars)
	if err != nil {
		return false, nil, err
	}
	m := re.FindStringSubmatchIndex(line)
	if m == nil {
		return false, nil, nil
	}
	// A group's number counts the groups before it, including those
	// inside the user's own regexes.
	bound := map[string]string{}
	group := 1
	for _, p := range d.parts {
		switch p.kind {
		case 'r':
			group += regexp.MustCompile(p.regex).NumSubexp()
		case 'd':
			bound[p.name] = line[m[2*group]:m[2*group+1]]
			group += 1 + regexp.MustCompile(p.regex).NumSubexp()
		case 'u':
			v, local := bound[p.name]
			if !local {
				continue
			}
			re := regexp.MustCompile(d.defRegex(p.name))
			if line[m[2*group]:m[2*group+1]] != v {
				return false, nil, nil
			}
			group += 1 + re.NumSubexp()
		}
	}
	return true, bound, nil
}

// defRegex is the regex of the definition of name in this pattern.
func (d *Directive) defRegex(name string) string {
	for _, p := range d.parts {
		if p.kind == 'd' && p.name == name {
			return p.regex
		}
	}
	return ""
}

// Match checks the output against the script's CHECK directives.
func (s *Script) Match(output string) error {
	lines := strings.Split(strings.TrimSuffix(output, "\n"), "\n")
	vars := map[string]string{}
	cursor, last := 0, -1 // next line to search; line of the last match
	var nots []Directive
	fail := func(d Directive, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %s: %s", s.Path, d.Line, d.Kind, d.Pattern, fmt.Sprintf(format, args...))
	}
	// checkNots fails if a pending CHECK-NOT matches a line in [lo, hi).
	checkNots := func(lo, hi int) error {
		for _, d := range nots {
			for i := lo; i < hi; i++ {
				ok, _, err := d.match(lines[i], vars)
				if err != nil {
					return fail(d, "%v", err)
				}
				if ok {
					return fail(d, "output line %d matches: %s", i+1, lines[i])
				}
			}
		}
		nots = nots[:0]
		return nil
	}
	for _, d := range s.Checks {
		switch d.Kind {
		case CheckNot:
			nots = append(nots, d)
			continue
		case CheckNext:
			if last+1 >= len(lines) {
				return fail(d, "no line after output line %d", last+1)
			}
			ok, bound, err := d.match(lines[last+1], vars)
			if err != nil {
				return fail(d, "%v", err)
			}
			if !ok {
				return fail(d, "not on the line after output line %d:\n  %d: %s\n  %d: %s", last+1, last+1, lines[last], last+2, lines[last+1])
			}
			if err := checkNots(cursor, last+1); err != nil {
				return err
			}
			last, cursor = last+1, last+2
			for k, v := range bound {
				vars[k] = v
			}
			continue
		}
		found := -1
		var bound map[string]string
		for i := cursor; i < len(lines); i++ {
			ok, b, err := d.match(lines[i], vars)
			if err != nil {
				return fail(d, "%v", err)
			}
			if ok {
				found, bound = i, b
				break
			}
		}
		if found < 0 {
			where := "the start of the output"
			if last >= 0 {
				where = fmt.Sprintf("output line %d (%s)", last+1, lines[last])
			}
			return fail(d, "no match after %s", where)
		}
		if err := checkNots(cursor, found); err != nil {
			return err
		}
		last, cursor = found, found+1
		for k, v := range bound {
			vars[k] = v
		}
	}
	return checkNots(cursor, len(lines))
}

// MatchError checks an error's text against the CHECK-ERROR
// directives: each must match a line of it.
func (s *Script) MatchError(err error) error {
	if err == nil {
		return fmt.Errorf("%s:%d: CHECK-ERROR: the RUN line succeeded", s.Path, s.Errors[0].Line)
	}
	lines := strings.Split(err.Error(), "\n")
	for _, d := range s.Errors {
		found := false
		for _, l := range lines {
			ok, _, merr := d.match(l, map[string]string{})
			if merr != nil {
				return fmt.Errorf("%s:%d: CHECK-ERROR: %s: %v", s.Path, d.Line, d.Pattern, merr)
			}
			found = found || ok
		}
		if !found {
			return fmt.Errorf("%s:%d: CHECK-ERROR: %s: not in the error: %v", s.Path, d.Line, d.Pattern, err)
		}
	}
	return nil
}
