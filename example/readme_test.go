package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMESnippetsCompile: every ```go block in the README is a whole
// Example function (from its func line to its closing brace, its Output
// comment included) taken from a file named example*_test.go, so it
// compiles as shown, defines everything it uses, and its behaviour is
// checked by the Example's output. The test compares trimmed, non-empty
// lines.
func TestREADMESnippetsCompile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
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
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("no ```go blocks in README.md")
	}
	for i, block := range blocks {
		want := lines(block)
		joined := strings.Join(want, "\n")
		if len(want) < 2 || !strings.HasPrefix(want[0], "func Example") || want[len(want)-1] != "}" ||
			strings.Count(joined, "{") != strings.Count(joined, "}") {
			t.Errorf("README go block %d is not a whole Example function (func Example...() { ... }):\n%s", i+1, block)
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
			t.Errorf("README go block %d is not taken verbatim from an Example function:\n%s", i+1, block)
		}
	}
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
