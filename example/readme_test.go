package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestREADMESnippetsCompile: every ```go block in the README and in the
// guides (docs/*.md) is a whole Example function (from its func line to
// its closing brace, its Output comment included) taken from a file named
// example*_test.go, so it compiles as shown, defines everything it uses,
// and go test runs it and checks its behaviour by the Example's output.
// The test compares trimmed, non-empty lines. To show new code in a
// guide, write it as an Example next to the API it shows and paste the
// whole function; a fragment of Go in a block of another language, or in
// an indented block, fails the test too (see goOutsideBlocks), so no
// snippet escapes the check.
func TestREADMESnippetsCompile(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"../README.md"}, docs...)
	var examples [][]string
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "peerbench" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if name := d.Name(); strings.HasPrefix(name, "example") && strings.HasSuffix(name, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			examples = append(examples, lines(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, file := range files {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../")
		for _, frag := range goOutsideBlocks(string(md)) {
			t.Errorf("%s: Go outside a ```go block (make it a whole Example, or prose):\n%s", name, frag)
		}
		blocks := goBlocks(string(md))
		total += len(blocks)
		for i, block := range blocks {
			want := lines(block)
			joined := strings.Join(want, "\n")
			if len(want) < 2 || !strings.HasPrefix(want[0], "func Example") || want[len(want)-1] != "}" ||
				strings.Count(joined, "{") != strings.Count(joined, "}") {
				t.Errorf("%s: go block %d is not a whole Example function (func Example...() { ... }):\n%s", name, i+1, block)
				continue
			}
			found := false
			for _, ex := range examples {
				if wholeIn(ex, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: go block %d is not taken verbatim from an Example function:\n%s", name, i+1, block)
			}
		}
	}
	if total == 0 {
		t.Fatal("no ```go blocks in README.md or docs/*.md")
	}
}

// goOutsideBlocks returns the fenced blocks of another language (or none)
// and the indented blocks of md that look like Go: a line declaring a
// func, or assigning with :=.
func goOutsideBlocks(md string) []string {
	var out []string
	looksGo := func(l string) bool {
		l = strings.TrimSpace(l)
		return strings.HasPrefix(l, "func ") || strings.Contains(l, " := ")
	}
	fence, lang, body := false, "", []string(nil)
	prevBlank := true
	for l := range strings.SplitSeq(md, "\n") {
		switch {
		case strings.HasPrefix(l, "```") && !fence:
			fence, lang, body = true, strings.TrimPrefix(l, "```"), nil
		case strings.HasPrefix(l, "```"):
			fence = false
			if lang != "go" && slices.ContainsFunc(body, looksGo) {
				out = append(out, strings.Join(body, "\n"))
			}
		case fence:
			body = append(body, l)
		case prevBlank && (strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")) && looksGo(l):
			out = append(out, l)
		}
		prevBlank = strings.TrimSpace(l) == "" || (prevBlank && (strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")))
	}
	return out
}

func goBlocks(md string) []string {
	var out []string
	for {
		start := strings.Index(md, "```go\n")
		if start < 0 {
			return out
		}
		md = md[start+len("```go\n"):]
		end := strings.Index(md, "\n```") // a fence starts its line
		if end < 0 {
			return out
		}
		out = append(out, md[:end+1])
		md = md[end+4:]
	}
}

func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// wholeIn reports whether needle, a function from its func line to its
// closing brace, appears in hay as a whole declaration: what follows it is
// the end of the file, a comment or another declaration.
func wholeIn(hay, needle []string) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		if next := i + len(needle); next < len(hay) && !strings.HasPrefix(hay[next], "//") && !strings.HasPrefix(hay[next], "func ") &&
			!strings.HasPrefix(hay[next], "type ") && !strings.HasPrefix(hay[next], "var ") && !strings.HasPrefix(hay[next], "const ") {
			continue
		}
		match := true
		for j := range needle {
			if hay[i+j] != needle[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestREADMEShape keeps the README a five-minute read: at most 300 lines,
// the two commands within its first 20, a one-line constructor within its
// first 80, and each quick-start Example at most 25 lines. The rest
// belongs in docs/.
func TestREADMEShape(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > 300 {
		t.Errorf("README.md has %d lines, want at most 300: move detail to a guide in docs/", len(all))
	}
	within := func(n int, s string) {
		t.Helper()
		for _, l := range all[:min(n, len(all))] {
			if strings.Contains(l, s) {
				return
			}
		}
		t.Errorf("README.md: %q not within its first %d lines", s, n)
	}
	within(20, "go run ./example")
	within(20, "make test")
	within(80, "middleware.Per")
	for i, block := range goBlocks(string(b)) {
		if n := strings.Count(block, "\n"); n > 25 {
			t.Errorf("README.md: go block %d has %d lines, want at most 25 for a quick start", i+1, n)
		}
	}
}

// TestArchitectureHops: docs/architecture.md follows one GET from
// Middleware.Handler to the EVALSHA in at most 8 numbered hops, the last
// of which sends the EVALSHA, and every Go file a hop names exists.
func TestArchitectureHops(t *testing.T) {
	b, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## One request, hop by hop")
	if i < 0 {
		t.Fatal(`docs/architecture.md has no section "## One request, hop by hop"`)
	}
	sec := doc[i:]
	if j := strings.Index(sec, "\nAnd back:"); j >= 0 {
		sec = sec[:j]
	}
	var hops []string
	for _, l := range strings.Split(sec, "\n") {
		if n, _, ok := strings.Cut(l, ". "); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			hops = append(hops, l)
		} else if len(hops) > 0 && strings.HasPrefix(l, "   ") {
			hops[len(hops)-1] += " " + strings.TrimSpace(l)
		}
	}
	if len(hops) == 0 || len(hops) > 8 {
		t.Fatalf("%d hops from the handler to the EVALSHA, want 1 to 8", len(hops))
	}
	if !strings.Contains(hops[len(hops)-1], "EVALSHA") {
		t.Errorf("the last hop does not send the EVALSHA: %s", hops[len(hops)-1])
	}
	if !strings.Contains(hops[0], "Middleware.Handler") {
		t.Errorf("the first hop is not Middleware.Handler: %s", hops[0])
	}
	dirs := []string{"..", "../middleware", "../keyfunc", "../headers", "../algorithms/denycache", "../algorithms/redisstore"}
	for _, h := range hops {
		for _, f := range strings.Split(h, "`") {
			if !strings.HasSuffix(f, ".go") || strings.ContainsAny(f, " (") {
				continue
			}
			found := false
			for _, d := range dirs {
				if _, err := os.Stat(d + "/" + f); err == nil {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("a hop names %s, which is no file of the module", f)
			}
		}
	}
}
