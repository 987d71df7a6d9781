package gen

import (
	"fmt"
	"slices"
	"strings"
)

// luaWords are Lua's keywords and the globals a formula may name: the
// standard library it uses, redis, and floor, which every script that
// inlines a formula defines first (local floor = math.floor).
var luaWords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "if": true, "in": true, "local": true,
	"nil": true, "not": true, "or": true, "repeat": true, "return": true, "then": true,
	"true": true, "until": true, "while": true,
	"math": true, "string": true, "table": true, "redis": true, "tonumber": true,
	"tostring": true, "type": true, "unpack": true, "pcall": true, "error": true,
	"ipairs": true, "pairs": true, "next": true, "select": true, "floor": true,
}

// check holds a formula to the rules that make its inputs and outputs
// explicit: its inputs and outputs are names, distinct from one another;
// its body names nothing but them, its own locals and luaWords (no local
// of the script around it, no KEYS or ARGV), never assigns an input, and
// never returns (an inline is not a function: it ends at its end).
func (f *Formula) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("lua: %s: formula %s: %s", f.File, f.Name, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for _, n := range append(slices.Clone(f.In), f.Out...) {
		if !nameRE.MatchString(n) || luaWords[n] {
			return fail("%q is no name of its own", n)
		}
		if seen[n] {
			return fail("%s is named twice among its inputs and outputs", n)
		}
		seen[n] = true
	}
	known := map[string]bool{}
	for _, n := range append(slices.Clone(f.In), f.Out...) {
		known[n] = true
	}
	// an inline reads as the call it stands for: its arguments are read,
	// its outputs assigned (or declared)
	var body strings.Builder
	for _, l := range f.Body {
		if m := inlineRE.FindStringSubmatch(l); m != nil {
			known[m[3]] = true
			fmt.Fprintf(&body, "%s%s%s = %s(%s)\n", m[1], m[2], m[5], m[3], m[4])
			continue
		}
		body.WriteString(l)
	}
	toks := tokens(body.String())
	braces := 0
	for i, t := range toks {
		switch t {
		case "{":
			braces++
		case "}":
			braces--
		case "return":
			return fail("returns: a formula ends at its end, its outputs assigned")
		}
		if !nameRE.MatchString(t) || luaWords[t] && t != "local" && t != "for" {
			continue
		}
		prev := ""
		if i > 0 {
			prev = toks[i-1]
		}
		if prev == "." || prev == ":" {
			continue // a field
		}
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case t == "local" || t == "for":
			// the names it declares, up to = or in
			for j := i + 1; j < len(toks) && toks[j] != "=" && toks[j] != "in"; j++ {
				if nameRE.MatchString(toks[j]) && toks[j] != "function" {
					known[toks[j]] = true
				}
			}
		case braces > 0 && next == "=":
			// a table constructor's key
		case !known[t]:
			return fail("names %s, which is none of its inputs, outputs or locals", t)
		}
	}
	for _, t := range assigned(toks) {
		if slices.Contains(f.In, t) {
			return fail("assigns its input %s", t)
		}
	}
	return nil
}

// assigned returns the names that the statements of toks assign (not
// those a local declares, nor fields).
func assigned(toks []string) []string {
	var out []string
	braces := 0
	for i, t := range toks {
		switch t {
		case "{":
			braces++
		case "}":
			braces--
		}
		if t != "=" || braces > 0 {
			continue
		}
		var targets []string
		j := i - 1
		for ; j >= 0; j-- {
			p := toks[j]
			if p == "," {
				continue
			}
			if !nameRE.MatchString(p) || luaWords[p] {
				break
			}
			targets = append(targets, p)
		}
		if j >= 0 && (toks[j] == "local" || toks[j] == "for") {
			continue
		}
		if j >= 0 && (toks[j] == "." || toks[j] == "]") {
			continue // a field
		}
		out = append(out, targets...)
	}
	return out
}

// tokens splits Lua source into names, numbers, strings and
// punctuation, without comments; "==", "~=", "<=", ">=" and ".." are one
// token each; a string is a pair of quotes, a number "0". A line break
// is a token of its own ("\n"), so that the start of a statement can be
// told.
func tokens(src string) []string {
	var out []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			out = append(out, "\n")
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "--"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, "''")
			i = j + 1
		case isNameByte(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(src) && isNameByte(src[j]) {
				j++
			}
			out = append(out, src[i:j])
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (isNameByte(src[j]) || src[j] == '.') {
				j++
			}
			out = append(out, "0")
			i = j
		default:
			two := ""
			if i+1 < len(src) {
				two = src[i : i+2]
			}
			switch two {
			case "==", "~=", "<=", ">=", "..":
				out = append(out, two)
				i += 2
			default:
				out = append(out, string(c))
				i++
			}
		}
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
