// Package gen builds the scripts Redis runs from redlimit's Lua sources
// (the .lua files of package lua): it reads their sections and formulas,
// inlines each formula where a section names it, fills the few values a
// recipe names, and joins sections into scripts (see [Build], and
// lua/doc.go for the language of the sources).
package gen

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// A source line that starts (after spaces) with "--@" is a directive:
//
//	--@ section <name>                  text of a section, until --@ end
//	--@ formula <name>(<in>, ...) -> <out>, ...
//	                                    a formula's body, until --@ end
//	--@ end
//	--@ inline [local] <name>(<expr>, ...) -> <var>, ...
//	                                    the formula's body, here, inputs
//	                                    bound to the expressions, outputs
//	                                    to the variables (declared with
//	                                    local)
//
// Text outside sections and formulas is the file's documentation; a file
// without any section is one section named after it.

// Sources are the sections and formulas of a set of source files.
type Sources struct {
	sections map[string]*section // "<file>.<name>", or "<file>" for a whole file
	formulas map[string]*Formula
	files    []string // the files read, sorted
}

type section struct {
	file  string // "gcra.lua"
	name  string
	lines []string
}

// Formula is one formula of the sources: a block of Lua that computes
// its outputs from its inputs.
type Formula struct {
	Name string
	File string   // the source file that holds it
	In   []string // its inputs, in order
	Out  []string // its outputs, in order
	Body []string // its lines
}

var (
	sectionRE = regexp.MustCompile(`^\s*--@ section ([a-z_][a-z0-9_]*)\s*$`)
	formulaRE = regexp.MustCompile(`^\s*--@ formula ([a-z_][a-z0-9_]*)\(([^)]*)\) -> (.+?)\s*$`)
	endRE     = regexp.MustCompile(`^\s*--@ end\s*$`)
	inlineRE  = regexp.MustCompile(`^(\s*)--@ inline (local )?([a-z_][a-z0-9_]*)\((.*)\) -> (.+?)\s*$`)
	nameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	varRE     = regexp.MustCompile(`\$\{([a-z_]+)\}`)
)

// Parse reads every .lua file of fsys's root.
func Parse(fsys fs.FS) (*Sources, error) {
	files, err := fs.Glob(fsys, "*.lua")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	s := &Sources{sections: map[string]*section{}, formulas: map[string]*Formula{}, files: files}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if err := s.parseFile(f, string(b)); err != nil {
			return nil, err
		}
	}
	for _, f := range s.formulas {
		if err := f.check(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Sources) parseFile(file, text string) error {
	base := strings.TrimSuffix(path.Base(file), ".lua")
	lines := strings.SplitAfter(text, "\n")
	if !strings.Contains(text, "--@ section") && !strings.Contains(text, "--@ formula") {
		s.sections[base] = &section{file: file, name: base, lines: lines}
		return nil
	}
	var cur *section
	var form *Formula
	for i, l := range lines {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("lua: %s:%d: %s", file, i+1, fmt.Sprintf(format, args...))
		}
		switch {
		case sectionRE.MatchString(l):
			if cur != nil || form != nil {
				return fail("a section inside a block: --@ end first")
			}
			id := base + "." + sectionRE.FindStringSubmatch(l)[1]
			if s.sections[id] != nil {
				return fail("section %s again", id)
			}
			cur = &section{file: file, name: id}
			s.sections[id] = cur
		case formulaRE.MatchString(l):
			if cur != nil || form != nil {
				return fail("a formula inside a block: --@ end first")
			}
			m := formulaRE.FindStringSubmatch(l)
			if f := s.formulas[m[1]]; f != nil {
				return fail("formula %s is written in %s already", m[1], f.File)
			}
			form = &Formula{Name: m[1], File: file, In: splitNames(m[2]), Out: splitNames(m[3])}
			s.formulas[m[1]] = form
		case endRE.MatchString(l):
			if cur == nil && form == nil {
				return fail("--@ end outside a block")
			}
			cur, form = nil, nil
		case strings.HasPrefix(strings.TrimSpace(l), "--@") && !inlineRE.MatchString(l):
			return fail("unknown directive %q", strings.TrimSpace(l))
		case cur != nil:
			cur.lines = append(cur.lines, l)
		case form != nil:
			form.Body = append(form.Body, l)
		}
	}
	if cur != nil || form != nil {
		return fmt.Errorf("lua: %s: a block without --@ end", file)
	}
	return nil
}

// splitNames splits "a, b" into its names; "" is none.
func splitNames(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(n))
	}
	return out
}

// Formulas returns the formulas of the sources, by name.
func (s *Sources) Formulas() map[string]*Formula { return s.formulas }

// Files returns the source files read.
func (s *Sources) Files() []string { return s.files }

// Sections returns the names of the sections, sorted.
func (s *Sources) Sections() []string {
	var out []string
	for n := range s.sections {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// File returns the source file of the section named name.
func (s *Sources) File(name string) string {
	if sec := s.sections[name]; sec != nil {
		return sec.file
	}
	return ""
}

// Expand returns the text of the section named name with its formulas
// inlined and its ${var} filled from vars; every ${var} must have a
// value.
func (s *Sources) Expand(name string, vars map[string]string) (string, error) {
	sec := s.sections[name]
	if sec == nil {
		return "", fmt.Errorf("lua: no section %s", name)
	}
	var b strings.Builder
	if err := s.expand(&b, sec.file, sec.lines, nil); err != nil {
		return "", err
	}
	out := b.String()
	var missing error
	out = varRE.ReplaceAllStringFunc(out, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok && missing == nil {
			missing = fmt.Errorf("lua: section %s: no value for %s", name, m)
		}
		return v
	})
	return out, missing
}

// expand writes lines, inlining formulas; stack holds the formulas being
// inlined (a formula may not inline itself).
func (s *Sources) expand(b *strings.Builder, file string, lines []string, stack []string) error {
	for _, l := range lines {
		m := inlineRE.FindStringSubmatch(l)
		if m == nil {
			b.WriteString(l)
			continue
		}
		indent, decl, name := m[1], m[2] != "", m[3]
		f := s.formulas[name]
		if f == nil {
			return fmt.Errorf("lua: %s: inline of %s, which no source writes", file, name)
		}
		if slices.Contains(stack, name) {
			return fmt.Errorf("lua: formula %s inlines itself", name)
		}
		args, err := splitArgs(m[4])
		if err != nil {
			return fmt.Errorf("lua: %s: inline %s: %v", file, name, err)
		}
		outs := splitNames(m[5])
		if len(args) != len(f.In) || len(outs) != len(f.Out) {
			return fmt.Errorf("lua: %s: inline %s with %d inputs and %d outputs, want %d and %d", file, name, len(args), len(outs), len(f.In), len(f.Out))
		}
		for _, o := range outs {
			if !nameRE.MatchString(o) {
				return fmt.Errorf("lua: %s: inline %s: output %q is no name", file, name, o)
			}
		}
		if err := s.inline(b, indent, decl, f, args, outs, stack); err != nil {
			return err
		}
	}
	return nil
}

// inline writes f's body, indented, in a do block: its inputs bound to
// args (those named as the input already are not bound again), its
// outputs assigned straight to the caller's variables where they have the
// formula's names, else through locals copied out at its end.
func (s *Sources) inline(b *strings.Builder, indent string, decl bool, f *Formula, args, outs []string, stack []string) error {
	if decl {
		fmt.Fprintf(b, "%slocal %s\n", indent, strings.Join(outs, ", "))
	}
	fmt.Fprintf(b, "%sdo -- %s(%s) -> %s, from %s\n", indent, f.Name, strings.Join(f.In, ", "), strings.Join(f.Out, ", "), f.File)
	in := indent + "  "
	var names, exprs []string
	for i, a := range args {
		if a != f.In[i] {
			names, exprs = append(names, f.In[i]), append(exprs, a)
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(b, "%slocal %s = %s\n", in, strings.Join(names, ", "), strings.Join(exprs, ", "))
	}
	var temps, dests []string
	for i, o := range outs {
		if o != f.Out[i] || slices.Contains(f.In, o) {
			temps, dests = append(temps, f.Out[i]), append(dests, o)
		}
	}
	if len(temps) > 0 {
		fmt.Fprintf(b, "%slocal %s\n", in, strings.Join(temps, ", "))
	}
	var body strings.Builder
	if err := s.expand(&body, f.File, f.Body, append(stack, f.Name)); err != nil {
		return err
	}
	for l := range strings.SplitAfterSeq(body.String(), "\n") {
		if strings.TrimSpace(l) == "" {
			b.WriteString(l)
			continue
		}
		b.WriteString(in + l)
	}
	if len(temps) > 0 {
		fmt.Fprintf(b, "%s%s = %s\n", in, strings.Join(dests, ", "), strings.Join(temps, ", "))
	}
	fmt.Fprintf(b, "%send\n", indent)
	return nil
}

// splitArgs splits a call's arguments at the commas outside brackets and
// strings.
func splitArgs(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if depth != 0 || quote != 0 {
		return nil, fmt.Errorf("unbalanced %q", s)
	}
	if strings.TrimSpace(s) != "" {
		out = append(out, strings.TrimSpace(s[start:]))
	}
	return out, nil
}
