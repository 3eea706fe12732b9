package ir

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// ParseError is a problem in a dump at a line and column (both from 1;
// the column counts bytes).
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("ir: parse: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// maxSynthBytes bounds a tensor attribute whose data the dump leaves out
// and Parse makes up: bigger ones are refused rather than allocated.
const maxSynthBytes = 16 << 20

// Parse reads the text Dump or DumpModel writes back into a model, so
// tests can start from a few lines instead of a builder. Parse of a
// dump dumps identically. What the dump leaves out is made up
// deterministically:
//
//   - the names of op outputs: NAME_i for output i of the op named NAME
//     (the irtest convention), v<ID> for an unnamed op's, with a suffix
//     where that name is taken;
//   - the data of an initializer or tensor attribute too big to print:
//     a fixed pattern of small numbers for floating-point types, zeros
//     otherwise (an initializer loads it lazily);
//   - op IDs, which follow the order;
//   - the operator sets when there is no opsets line (the newest).
//
// The graph inputs marked [param] are also listed under ParamInputsKey,
// as an imported model lists them. A hand-written input may leave out
// the types after an op's colon (the colon too): they are then inferred,
// which needs every input of the op defined on an earlier line. Lines
// may end in a comment (# …); blank lines and comment lines are
// skipped. Parse does not verify the graph: run Verify for that.
func Parse(src []byte) (*Model, error) {
	p := &parser{byID: map[int]*pDef{}}
	if err := p.lines(src); err != nil {
		return nil, err
	}
	return p.build(len(src))
}

// The parser reads every line into the records below, then builds the
// graph from them, so a reference may point at a later line (a
// parameter's [next %N]) and every error can name its position.
type parser struct {
	opsets    map[string]int64
	name      string
	haveGraph bool
	defs      []*pDef // inputs and initializers, in file order
	ops       []*pOp
	outputs   []pRef
	ret       bool
	byID      map[int]*pDef
}

type pRef struct {
	id        int // -1: absent ("_")
	line, col int
}

// pDef is one defined value: an input, an initializer or an op output.
type pDef struct {
	ref   pRef
	kind  ValueKind
	name  string
	typ   pType // inputs and initializers; an op's are on the op
	param bool
	next  *pRef
	v     *Value // once built
}

// pType is a written type: element type, shape and, when given, data.
// An absent output's type (_) has no element type.
type pType struct {
	dt    DType
	shape Shape
	data  *Tensor
}

type pOp struct {
	line, col int
	outs      []pRef
	typ       string
	domain    string
	name      string
	ins       []pRef
	attrs     []Attr
	phase     Phase
	origin    string
	host      bool
	types     []pType // nil: infer
}

// scanner reads one line.
type scanner struct {
	s    string
	pos  int
	line int
}

func (c *scanner) errAt(pos int, format string, args ...any) error {
	return &ParseError{Line: c.line, Col: pos + 1, Msg: fmt.Sprintf(format, args...)}
}

func (c *scanner) errf(format string, args ...any) error { return c.errAt(c.pos, format, args...) }

func (c *scanner) space() {
	for c.pos < len(c.s) && (c.s[c.pos] == ' ' || c.s[c.pos] == '\t') {
		c.pos++
	}
}

func (c *scanner) done() bool { c.space(); return c.pos >= len(c.s) }

func (c *scanner) peek() byte {
	if c.pos < len(c.s) {
		return c.s[c.pos]
	}
	return 0
}

func (c *scanner) accept(tok string) bool {
	if strings.HasPrefix(c.s[c.pos:], tok) {
		c.pos += len(tok)
		return true
	}
	return false
}

// keyword accepts a whole word: kw followed by a space or the end.
func (c *scanner) keyword(kw string) bool {
	if strings.HasPrefix(c.s[c.pos:], kw) && c.endOfWord(len(kw)) {
		c.pos += len(kw)
		return true
	}
	return false
}

func (c *scanner) expect(tok string) error {
	if !c.accept(tok) {
		return c.errf("want %q, found %s", tok, c.found())
	}
	return nil
}

// found describes what is at the cursor, for messages.
func (c *scanner) found() string {
	if c.pos >= len(c.s) {
		return "the end of the line"
	}
	r := c.s[c.pos:]
	if len(r) > 12 {
		r = r[:12] + "…"
	}
	return strconv.Quote(r)
}

// word reads a run of letters, digits, '_', '-', '.' (and ':' when
// colon is set, for domain-qualified op types).
func (c *scanner) word(colon bool) string {
	start := c.pos
	for c.pos < len(c.s) {
		ch := rune(c.s[c.pos])
		if !isWordChar(ch) && !(colon && ch == ':') {
			break
		}
		c.pos++
	}
	return c.s[start:c.pos]
}

func (c *scanner) quoted() (string, error) {
	q, err := strconv.QuotedPrefix(c.s[c.pos:])
	if err != nil || q[0] != '"' {
		return "", c.errf("want a quoted string, found %s", c.found())
	}
	s, err := strconv.Unquote(q)
	if err != nil {
		return "", c.errf("bad string %s", q)
	}
	c.pos += len(q)
	return s, nil
}

// ref reads %N, or "_" when absentOK.
func (c *scanner) ref(absentOK bool) (pRef, error) {
	r := pRef{line: c.line, col: c.pos + 1}
	if absentOK && c.accept("_") {
		r.id = -1
		return r, nil
	}
	if !c.accept("%") {
		return r, c.errf("want a value (%%N), found %s", c.found())
	}
	start := c.pos
	for c.pos < len(c.s) && c.s[c.pos] >= '0' && c.s[c.pos] <= '9' {
		c.pos++
	}
	n, err := strconv.ParseInt(c.s[start:c.pos], 10, 32)
	if err != nil {
		return r, c.errAt(start, "bad value number %q", c.s[start:c.pos])
	}
	r.id = int(n)
	return r, nil
}

// int64s reads "[a,b,…]": a shape or an ints attribute.
func (c *scanner) int64s() ([]int64, error) {
	if err := c.expect("["); err != nil {
		return nil, err
	}
	out := []int64{}
	if c.accept("]") {
		return out, nil
	}
	for {
		start := c.pos
		for c.pos < len(c.s) && (c.s[c.pos] == '-' || c.s[c.pos] >= '0' && c.s[c.pos] <= '9') {
			c.pos++
		}
		n, err := strconv.ParseInt(c.s[start:c.pos], 10, 64)
		if err != nil {
			return nil, c.errAt(start, "want an integer, found %s", strconv.Quote(c.s[start:min(len(c.s), start+12)]))
		}
		out = append(out, n)
		if c.accept("]") {
			return out, nil
		}
		if err := c.expect(","); err != nil {
			return nil, err
		}
	}
}

// dtype reads an element type name (f32, i64, …).
func (c *scanner) dtype() (DType, error) {
	start := c.pos
	w := c.word(false)
	if dt, ok := dtypeByName(w); ok {
		return dt, nil
	}
	return 0, c.errAt(start, "unknown element type %q", w)
}

func dtypeByName(s string) (DType, bool) {
	for i := range dtypeInfo {
		if d := DType(i); d.Valid() && dtypeInfo[i].name == s {
			return d, true
		}
	}
	return 0, false
}

// tensorType reads "f32[2,3]" and, when data is allowed, a following
// "=[…]" (or "[…]" in an attribute) with the elements.
func (c *scanner) tensorType(dataPrefix string) (pType, error) {
	var t pType
	var err error
	if t.dt, err = c.dtype(); err != nil {
		return t, err
	}
	start := c.pos
	dims, err := c.int64s()
	if err != nil {
		return t, err
	}
	t.shape = Shape(dims)
	if _, err := t.shape.Bytes(t.dt); err != nil {
		return t, c.errAt(start, "%v", err)
	}
	if dataPrefix != "" && strings.HasPrefix(c.s[c.pos:], dataPrefix+"[") {
		c.pos += len(dataPrefix)
		if t.data, err = c.data(t.dt, t.shape); err != nil {
			return t, err
		}
	}
	return t, nil
}

// data reads "[e1 e2 …]", the elements of a tensor of type dt and
// shape, as Dump prints folded values.
func (c *scanner) data(dt DType, shape Shape) (*Tensor, error) {
	start := c.pos
	if err := c.expect("["); err != nil {
		return nil, err
	}
	var toks []string
	var at []int
	for {
		c.space()
		if c.accept("]") {
			break
		}
		b := c.pos
		for c.pos < len(c.s) && c.s[c.pos] != ' ' && c.s[c.pos] != ']' {
			c.pos++
		}
		if b == c.pos {
			return nil, c.errf("unterminated data, want \"]\"")
		}
		toks, at = append(toks, c.s[b:c.pos]), append(at, b)
	}
	n, _ := shape.NumElements()
	if int64(len(toks)) != n {
		return nil, c.errAt(start, "%v%v has %d elements, the data %d", dt, shape, n, len(toks))
	}
	if dt == String {
		return nil, c.errAt(start, "string data cannot be written in a dump")
	}
	if dt.IsFloat() {
		vals := make([]float64, len(toks))
		for i, tok := range toks {
			f, err := strconv.ParseFloat(tok, 64)
			if err != nil {
				return nil, c.errAt(at[i], "want a number, found %q", tok)
			}
			vals[i] = f
		}
		return TensorFromFloat64s(dt, shape, vals), nil
	}
	vals := make([]int64, len(toks))
	for i, tok := range toks {
		v, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return nil, c.errAt(at[i], "want an integer, found %q", tok)
		}
		vals[i] = v
	}
	return TensorFromInt64s(dt, shape, vals), nil
}

// stripComment drops a trailing "# …" outside quoted strings.
func stripComment(s string) string {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == '#':
			return s[:i]
		}
	}
	return s
}

func (p *parser) lines(src []byte) error {
	for n, raw := range bytes.Split(src, []byte("\n")) {
		c := &scanner{s: strings.TrimRight(stripComment(string(raw)), " \t\r"), line: n + 1}
		if c.done() {
			continue
		}
		if p.ret {
			return c.errf("nothing may follow the return line")
		}
		var err error
		switch {
		case c.keyword("opsets"):
			err = p.opsetsLine(c)
		case c.keyword("graph"):
			err = p.graphLine(c)
		case !p.haveGraph:
			err = c.errf("want `graph \"NAME\"` first, found %s", c.found())
		case c.keyword("return"):
			err = p.returnLine(c)
		default:
			err = p.valueLine(c)
		}
		if err != nil {
			return err
		}
	}
	if !p.haveGraph {
		return &ParseError{Line: 1, Col: 1, Msg: "no `graph \"NAME\"` line"}
	}
	if !p.ret {
		return &ParseError{Line: len(bytes.Split(src, []byte("\n"))), Col: 1, Msg: "no return line"}
	}
	return nil
}

func (p *parser) opsetsLine(c *scanner) error {
	if p.haveGraph || p.opsets != nil {
		return c.errAt(0, "the opsets line must come once, before the graph line")
	}
	p.opsets = map[string]int64{}
	for !c.done() {
		start := c.pos
		d := c.word(false)
		if d == "" {
			return c.errf("want DOMAIN=VERSION, found %s", c.found())
		}
		if err := c.expect("="); err != nil {
			return err
		}
		vs := c.pos
		v, err := strconv.ParseInt(c.word(false), 10, 64)
		if err != nil || v < 1 {
			return c.errAt(vs, "bad opset version")
		}
		if d == "ai.onnx" {
			d = ""
		}
		if _, dup := p.opsets[d]; dup {
			return c.errAt(start, "domain %q listed twice", d)
		}
		p.opsets[d] = v
	}
	return nil
}

func (p *parser) graphLine(c *scanner) error {
	if p.haveGraph {
		return c.errAt(0, "a second graph line")
	}
	c.space()
	name, err := c.quoted()
	if err != nil {
		return err
	}
	if !c.done() {
		return c.errf("unexpected %s after the graph name", c.found())
	}
	p.name, p.haveGraph = name, true
	return nil
}

func (p *parser) returnLine(c *scanner) error {
	for !c.done() {
		r, err := c.ref(false)
		if err != nil {
			return err
		}
		p.outputs = append(p.outputs, r)
	}
	p.ret = true
	return nil
}

// valueLine reads an input, initializer or op line.
func (p *parser) valueLine(c *scanner) error {
	line := &pOp{line: c.line, col: c.pos + 1}
	for {
		c.space()
		r, err := c.ref(true)
		if err != nil {
			return err
		}
		line.outs = append(line.outs, r)
		c.space()
		if !c.accept(",") {
			break
		}
	}
	if err := c.expect("="); err != nil {
		return err
	}
	c.space()
	kwAt := c.pos
	kw := c.word(true)
	if kw == "" {
		return c.errf("want input, init or an op type, found %s", c.found())
	}
	if kw == "input" || kw == "init" {
		if len(line.outs) != 1 || line.outs[0].id < 0 {
			return c.errAt(0, "%s defines exactly one value", kw)
		}
		kind := KindInput
		if kw == "init" {
			kind = KindInit
		}
		return p.graphValue(c, line.outs[0], kind)
	}
	if i := strings.LastIndexByte(kw, ':'); i >= 0 {
		line.domain, line.typ = kw[:i], kw[i+1:]
		if line.domain == "" || strings.ContainsRune(line.domain, ':') {
			return c.errAt(kwAt, "bad op domain in %q", kw)
		}
	} else {
		line.typ = kw
	}
	if line.typ == "" || strings.ContainsAny(line.typ, ".-") {
		return c.errAt(kwAt, "bad op type %q", kw)
	}
	return p.opLine(c, line)
}

func (p *parser) define(d *pDef) error {
	if d.ref.id < 0 {
		return nil
	}
	if old, dup := p.byID[d.ref.id]; dup {
		return &ParseError{Line: d.ref.line, Col: d.ref.col, Msg: fmt.Sprintf("%%%d is defined twice (first on line %d)", d.ref.id, old.ref.line)}
	}
	p.byID[d.ref.id] = d
	return nil
}

func (p *parser) graphValue(c *scanner, r pRef, kind ValueKind) error {
	d := &pDef{ref: r, kind: kind}
	c.space()
	var err error
	if d.name, err = c.quoted(); err != nil {
		return err
	}
	c.space()
	prefix := ""
	if kind == KindInit {
		prefix = "="
	}
	if d.typ, err = c.tensorType(prefix); err != nil {
		return err
	}
	for !c.done() {
		at := c.pos
		if err := c.expect("["); err != nil {
			return err
		}
		switch w := c.word(false); {
		case w == "param" && !d.param:
			d.param = true
		case w == "next" && d.next == nil:
			c.space()
			nr, err := c.ref(false)
			if err != nil {
				return err
			}
			d.next = &nr
		default:
			return c.errAt(at, "want [param] or [next %%N] (once each), found %s", strconv.Quote(c.s[at:c.pos]))
		}
		if err := c.expect("]"); err != nil {
			return err
		}
	}
	p.defs = append(p.defs, d)
	return p.define(d)
}

func (p *parser) opLine(c *scanner, op *pOp) error {
	// Inputs.
	for {
		c.space()
		if ch := c.peek(); ch != '%' && !(ch == '_' && c.endOfWord(1)) {
			break
		}
		r, err := c.ref(true)
		if err != nil {
			return err
		}
		op.ins = append(op.ins, r)
	}
	// Attributes.
	if c.accept("{") {
		for {
			c.space()
			if c.accept("}") {
				break
			}
			a, err := c.attr()
			if err != nil {
				return err
			}
			if slices.ContainsFunc(op.attrs, func(b Attr) bool { return b.Name == a.Name }) {
				return c.errf("attribute %q given twice", a.Name)
			}
			op.attrs = append(op.attrs, a)
		}
		c.space()
	}
	if c.peek() == '"' {
		var err error
		if op.name, err = c.quoted(); err != nil {
			return err
		}
	}
	// Flags: phase, origin, host.
	var seenPhase bool
	for c.space(); c.peek() == '['; c.space() {
		at := c.pos
		c.pos++
		w := c.word(false)
		ph, isPhase := ParsePhase(w)
		switch {
		case isPhase && !seenPhase:
			op.phase, seenPhase = ph, true
		case w == "host" && !op.host:
			op.host = true
		case w == "origin" && op.origin == "" && c.accept("="):
			o, err := c.quoted()
			if err != nil {
				return err
			}
			if o == "" {
				return c.errAt(at, "empty origin")
			}
			op.origin = o
		case w != "" && !reservedFlags[w] && op.origin == "":
			op.origin = w
		default:
			return c.errAt(at, "unexpected or repeated flag %s", strconv.Quote(c.s[at:c.pos]))
		}
		if err := c.expect("]"); err != nil {
			return err
		}
	}
	// Output types.
	if c.accept(":") {
		for {
			c.space()
			var t pType
			if !c.accept("_") {
				var err error
				if t, err = c.tensorType("="); err != nil {
					return err
				}
			}
			op.types = append(op.types, t)
			c.space()
			if !c.accept(",") {
				break
			}
		}
		if len(op.types) != len(op.outs) {
			return c.errf("%d output types for %d outputs", len(op.types), len(op.outs))
		}
		for i, t := range op.types {
			if (op.outs[i].id < 0) != (t.dt == Undefined) {
				return c.errf("output %d: an absent output (_) has the type _, and only it", i)
			}
		}
	}
	if !c.done() {
		return c.errf("unexpected %s", c.found())
	}
	for _, r := range op.outs {
		if err := p.define(&pDef{ref: r, kind: KindOp}); err != nil {
			return err
		}
	}
	p.ops = append(p.ops, op)
	return nil
}

// endOfWord reports whether the byte n ahead ends a token.
func (c *scanner) endOfWord(n int) bool {
	i := c.pos + n
	return i >= len(c.s) || c.s[i] == ' ' || c.s[i] == '\t'
}

// attr reads NAME=VALUE in the spelling of Attr.Format.
func (c *scanner) attr() (Attr, error) {
	at := c.pos
	a := Attr{Name: c.word(false)}
	if a.Name == "" {
		return a, c.errf("want an attribute name, found %s", c.found())
	}
	if err := c.expect("="); err != nil {
		return a, err
	}
	vs := c.pos
	switch ch := c.peek(); {
	case ch == '"':
		s, err := c.quoted()
		a.Type, a.String = AttrString, s
		return a, err
	case ch == '[':
		return c.attrList(a)
	case ch == '<':
		end := strings.IndexByte(c.s[c.pos:], '>')
		if end < 0 {
			return a, c.errf("unterminated <kind>")
		}
		name := c.s[c.pos+1 : c.pos+end]
		t, ok := attrTypeByName(name)
		if !ok || t == AttrFloat || t == AttrInt || t == AttrString || t == AttrInts || t == AttrFloats || t == AttrStrings || t == AttrTensor {
			return a, c.errf("unknown opaque attribute kind %q", name)
		}
		c.pos += end + 1
		a.Type = t
		return a, nil
	case ch >= 'a' && ch <= 'z':
		w := c.word(false)
		switch w {
		case "tensor":
			a.Type = AttrTensor
			return a, nil
		case "floats", "strings":
			if err := c.expect("[]"); err != nil {
				return a, err
			}
			a.Type = map[string]AttrType{"floats": AttrFloats, "strings": AttrStrings}[w]
			return a, nil
		}
		c.pos = vs
		if _, ok := dtypeByName(w); ok {
			t, err := c.tensorType("")
			if err != nil {
				return a, err
			}
			if t.data == nil && c.peek() == '[' {
				if t.data, err = c.data(t.dt, t.shape); err != nil {
					return a, err
				}
			}
			if t.data == nil {
				if t.data, err = synthTensor(t.dt, t.shape, a.Name, maxSynthBytes); err != nil {
					return a, c.errAt(vs, "%v", err)
				}
			}
			a.Type, a.Tensor = AttrTensor, t.data
			return a, nil
		}
	}
	tok := c.number()
	if tok == "" {
		return a, c.errAt(at, "attribute %q: bad value %s", a.Name, c.found())
	}
	if isIntText(tok) {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return a, c.errAt(vs, "attribute %q: bad integer %q", a.Name, tok)
		}
		a.Type, a.Int = AttrInt, n
		return a, nil
	}
	f, err := strconv.ParseFloat(tok, 32)
	if err != nil {
		return a, c.errAt(vs, "attribute %q: bad number %q", a.Name, tok)
	}
	a.Type, a.Float = AttrFloat, float32(f)
	return a, nil
}

// number reads a numeric token: up to a space, ',', ']' or '}'.
func (c *scanner) number() string {
	start := c.pos
	for c.pos < len(c.s) && !strings.ContainsRune(" \t,]}", rune(c.s[c.pos])) {
		c.pos++
	}
	return c.s[start:c.pos]
}

// isIntText reports whether a number is written as an integer: only
// digits after an optional sign. Floats always carry a point, an
// exponent, Inf or NaN.
func isIntText(s string) bool {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	return t != "" && strings.Trim(t, "0123456789") == ""
}

func (c *scanner) attrList(a Attr) (Attr, error) {
	c.pos++ // '['
	if c.accept("]") {
		a.Type, a.Ints = AttrInts, []int64{}
		return a, nil
	}
	if c.peek() == '"' {
		a.Type = AttrStrings
		for {
			s, err := c.quoted()
			if err != nil {
				return a, err
			}
			a.Strings = append(a.Strings, s)
			if c.accept("]") {
				return a, nil
			}
			if err := c.expect(","); err != nil {
				return a, err
			}
		}
	}
	var toks []string
	var at []int
	for {
		at = append(at, c.pos)
		tok := c.number()
		if tok == "" {
			return a, c.errf("attribute %q: want a number, found %s", a.Name, c.found())
		}
		toks = append(toks, tok)
		if c.accept("]") {
			break
		}
		if err := c.expect(","); err != nil {
			return a, err
		}
	}
	ints := true
	for _, t := range toks {
		ints = ints && isIntText(t)
	}
	for i, t := range toks {
		if ints {
			n, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return a, c.errAt(at[i], "attribute %q: bad integer %q", a.Name, t)
			}
			a.Ints = append(a.Ints, n)
			continue
		}
		f, err := strconv.ParseFloat(t, 32)
		if err != nil {
			return a, c.errAt(at[i], "attribute %q: bad number %q", a.Name, t)
		}
		a.Floats = append(a.Floats, float32(f))
	}
	a.Type = AttrFloats
	if ints {
		a.Type = AttrInts
	}
	return a, nil
}

func attrTypeByName(s string) (AttrType, bool) {
	for t, n := range attrTypeNames {
		if n == s {
			return t, true
		}
	}
	var n int32
	if _, err := fmt.Sscanf(s, "attrtype(%d)", &n); err == nil && fmt.Sprintf("attrtype(%d)", n) == s {
		if _, named := attrTypeNames[AttrType(n)]; !named {
			return AttrType(n), true
		}
	}
	return 0, false
}

// synthTensor makes the data a dump leaves out: for floating-point
// types the pattern ((7919·i + h) mod 201 − 100)/1000, h from the name,
// so weights are small, varied and the same on every run; zeros for
// other types. It refuses tensors over limit bytes.
func synthTensor(dt DType, shape Shape, name string, limit int64) (*Tensor, error) {
	b, err := shape.Bytes(dt)
	if err != nil {
		return nil, err
	}
	if b > limit {
		return nil, fmt.Errorf("%v%v without data needs %d bytes, more than the %d Parse makes up", dt, shape, b, limit)
	}
	switch dt {
	case String:
		return &Tensor{DType: dt, Shape: shape.Clone()}, nil
	case Float, Double, Float16, BFloat16:
		h := fnv.New32a()
		h.Write([]byte(name))
		seed := int64(h.Sum32() % 1000)
		n, _ := shape.NumElements()
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64((int64(i)*7919+seed)%201-100) / 1000
		}
		return TensorFromFloat64s(dt, shape, vals), nil
	}
	return &Tensor{DType: dt, Shape: shape.Clone(), Raw: make([]byte, b)}, nil
}

// build makes the graph from the records.
func (p *parser) build(srcLen int) (*Model, error) {
	g := NewGraph(p.name)
	m := &Model{Graph: g, Opsets: p.opsets, Meta: map[string]string{}}
	if m.Opsets == nil {
		m.Opsets = map[string]int64{}
	}
	// IDs are kept, so a dump of the parsed graph names every value as
	// the source did. A removed value leaves a gap; a dump has at least
	// a few bytes per live value, which bounds the gaps it can show.
	maxID := -1
	for id := range p.byID {
		maxID = max(maxID, id)
	}
	if limit := 16*srcLen + 4096; maxID >= limit {
		d := p.byID[maxID]
		return nil, &ParseError{Line: d.ref.line, Col: d.ref.col, Msg: fmt.Sprintf("value number %d is implausibly large for a dump of %d bytes", maxID, srcLen)}
	}
	g.values = make([]*Value, maxID+1)
	newValue := func(d *pDef) *Value {
		v := &Value{ID: ValueID(d.ref.id), Name: d.name, Kind: d.kind, g: g}
		g.values[v.ID] = v
		d.v = v
		return v
	}
	// Inputs and initializers keep their names.
	for _, d := range p.defs {
		if old := g.byName[d.name]; old != nil {
			return nil, &ParseError{Line: d.ref.line, Col: d.ref.col, Msg: fmt.Sprintf("name %q is used twice", d.name)}
		}
		v := newValue(d)
		if d.name != "" {
			g.byName[d.name] = v
		}
		v.DType, v.Shape, v.Param = d.typ.dt, d.typ.shape, d.param
		if d.kind == KindInput {
			g.Inputs = append(g.Inputs, v)
			continue
		}
		g.Inits = append(g.Inits, v)
		if d.typ.data != nil {
			v.Const = d.typ.data
			continue
		}
		dt, shape, name := v.DType, v.Shape, v.Name
		v.Load = func() (*Tensor, error) { return synthTensor(dt, shape, name, MaxBytes) }
	}
	// Ops in order; their outputs get names made from the op's.
	for _, po := range p.ops {
		op := &Op{ID: OpID(len(g.ops)), Type: po.typ, Domain: po.domain, Name: po.name, Attrs: po.attrs,
			Phase: po.phase, Origin: po.origin, Host: po.host, g: g}
		g.ops = append(g.ops, op)
		g.order = append(g.order, op)
		if op.Name != "" {
			g.opNames[op.Name]++
		}
		op.outputs = make([]*Value, len(po.outs))
		for i, r := range po.outs {
			if r.id < 0 {
				continue
			}
			d := p.byID[r.id]
			d.name = outputName(g, op, i, r.id)
			v := newValue(d)
			g.byName[v.Name] = v
			v.Def, v.DefIndex = op, i
			op.outputs[i] = v
			if po.types != nil {
				t := po.types[i]
				v.DType, v.Shape, v.Const = t.dt, t.shape, t.data
			}
		}
	}
	lookup := func(r pRef) (*Value, error) {
		if r.id < 0 {
			return nil, nil
		}
		if d := p.byID[r.id]; d != nil {
			return d.v, nil
		}
		return nil, &ParseError{Line: r.line, Col: r.col, Msg: fmt.Sprintf("%%%d is not defined", r.id)}
	}
	for k, po := range p.ops {
		op := g.ops[k]
		op.inputs = make([]*Value, len(po.ins))
		for i, r := range po.ins {
			v, err := lookup(r)
			if err != nil {
				return nil, err
			}
			op.SetInput(i, v)
		}
	}
	for k, po := range p.ops {
		if po.types != nil {
			continue
		}
		op := g.ops[k]
		if LookupSchema(op.Domain, op.Type) == nil {
			return nil, &ParseError{Line: po.line, Col: po.col, Msg: fmt.Sprintf("%s is not in the op table: write its output types", op.QualifiedType())}
		}
		for i, v := range op.inputs {
			if v != nil && !v.DType.Valid() {
				r := po.ins[i]
				return nil, &ParseError{Line: r.line, Col: r.col, Msg: fmt.Sprintf("the types of %s are to be inferred, but %v has none yet (define it on an earlier line, or write the types)", op.Describe(), v)}
			}
		}
		if err := InferAndSet(op, m.Opset(op.Domain)); err != nil {
			return nil, &ParseError{Line: po.line, Col: po.col, Msg: err.Error()}
		}
	}
	for _, d := range p.defs {
		if d.next == nil {
			continue
		}
		v, err := lookup(*d.next)
		if err != nil {
			return nil, err
		}
		d.v.Next = v
	}
	for _, r := range p.outputs {
		v, err := lookup(r)
		if err != nil {
			return nil, err
		}
		g.Outputs = append(g.Outputs, v)
	}
	var params []string
	for _, v := range g.Inputs {
		if v.Param {
			params = append(params, v.Name)
		}
	}
	if len(params) > 0 {
		m.Meta[ParamInputsKey] = strings.Join(params, ",")
	}
	return m, nil
}

// outputName is the name Parse gives output i of op: NAME_i, or v<ID>
// for an unnamed op, made unique with a numeric suffix.
func outputName(g *Graph, op *Op, i, id int) string {
	base := fmt.Sprintf("v%d", id)
	if op.Name != "" {
		base = fmt.Sprintf("%s_%d", op.Name, i)
	}
	name := base
	for k := 1; g.byName[name] != nil; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	return name
}
