package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// features type-checks src as package p and lists its API.
func features(t *testing.T, src string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("example.com/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return packageFeatures(pkg)
}

func TestPackageFeatures(t *testing.T) {
	got := features(t, `package p
import "time"
const C = 3
type Limit struct { Rate int64; Period time.Duration; burst int }
type Store interface { Allow(n int, keys ...string) (bool, error) }
type sealed interface { M(); m() }
type Sealed sealed
func New(l Limit, opts ...func(*Limit)) (*Limit, error) { return nil, nil }
func (l Limit) Every() time.Duration { return 0 }
func (l *Limit) Set(n int64) {}
func (l *Limit) unexported() {}
type ID[T any] []T
var V, w = 1, 2
`)
	want := map[string]string{
		"pkg example.com/p, const C":                            "untyped int = 3",
		"pkg example.com/p, type Limit":                         "struct",
		"pkg example.com/p, type Limit struct, field Rate":      "int64",
		"pkg example.com/p, type Limit struct, field Period":    "time.Duration",
		"pkg example.com/p, type Store":                         "interface",
		"pkg example.com/p, type Store interface, method Allow": "func(int, ...string) (bool, error)",
		"pkg example.com/p, type Sealed":                        "interface (sealed)",
		"pkg example.com/p, type Sealed interface, method M":    "func()",
		"pkg example.com/p, func New":                           "func(Limit, ...func(*Limit)) (*Limit, error)",
		"pkg example.com/p, method (Limit) Every":               "func() time.Duration",
		"pkg example.com/p, method (*Limit) Set":                "func(int64)",
		"pkg example.com/p, type ID":                            "[T any][]T",
		"pkg example.com/p, var V":                              "int",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("feature %q = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected feature %q = %q", k, got[k])
		}
	}
}

func TestDiffAPI(t *testing.T) {
	old := features(t, `package p
type Limit struct { Rate int64 }
type Store interface { Allow() error }
type Sealed interface { M(); m() }
func New(n int) *Limit { return nil }
func Gone() {}
`)
	cur := features(t, `package p
type Limit struct { Rate int64; Burst int64 }
type Store interface { Allow() error; Reset() error }
type Sealed interface { M(); N(); m() }
type Fresh interface { A() }
func New(n int64) *Limit { return nil }
func Added() {}
`)
	want := map[string]bool{ // key → incompatible
		"removed pkg example.com/p, func Gone":                          true,
		"changed pkg example.com/p, func New":                           true,
		"added   pkg example.com/p, type Store interface, method Reset": true,
		"added   pkg example.com/p, type Sealed interface, method N":    false,
		"added   pkg example.com/p, type Limit struct, field Burst":     false,
		"added   pkg example.com/p, func Added":                         false,
		"added   pkg example.com/p, type Fresh":                         false,
		"added   pkg example.com/p, type Fresh interface, method A":     false,
	}
	changes := diffAPI(old, cur)
	if len(changes) != len(want) {
		t.Errorf("%d changes, want %d:", len(changes), len(want))
		for _, c := range changes {
			t.Log(c)
		}
	}
	for _, c := range changes {
		s := c.String()
		head, _, _ := strings.Cut(s, " | ")
		inc, ok := want[head]
		if !ok {
			t.Errorf("unexpected change %s", s)
			continue
		}
		if c.Incompatible != inc {
			t.Errorf("%s: incompatible %v, want %v", s, c.Incompatible, inc)
		}
	}
}

func TestSemver(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v1.0.0", "v10.20.30"} {
		if checkVersion(v) != nil {
			t.Errorf("checkVersion(%q) refused", v)
		}
	}
	for _, v := range []string{"0.1.0", "v0.1", "v0.01.0", "v0.1.0-rc.1", "v0.1.x", "v"} {
		if checkVersion(v) == nil {
			t.Errorf("checkVersion(%q) accepted", v)
		}
	}
	if compareSemver("v0.10.0", "v0.9.1") <= 0 || compareSemver("v1.0.0", "v1.0.0") != 0 {
		t.Error("compareSemver orders by number, not by text")
	}
	cases := []struct {
		prev, v string
		want    bool
	}{
		{"v0.0.0", "v0.1.0", true},
		{"v0.1.0", "v0.1.1", false},
		{"v0.1.0", "v0.2.0", true},
		{"v0.9.0", "v1.0.0", true},
		{"v1.0.0", "v1.1.0", false},
		{"v1.2.0", "v2.0.0", true},
	}
	for _, c := range cases {
		if got := allowsIncompatible(c.prev, c.v); got != c.want {
			t.Errorf("allowsIncompatible(%s, %s) = %v, want %v", c.prev, c.v, got, c.want)
		}
	}
}

func TestWithoutRoot(t *testing.T) {
	sum := "github.com/redis/go-redis/v9 v9.23.0 h1:a=\n" +
		"github.com/redlimit/redlimit v0.1.0 h1:b=\n" +
		"github.com/redlimit/redlimit v0.1.0/go.mod h1:c=\n" +
		"github.com/redlimit/redlimit/middleware/otel v0.1.0/go.mod h1:d=\n" +
		"github.com/redlimit/redlimitx v1.0.0 h1:e=\n"
	want := "github.com/redis/go-redis/v9 v9.23.0 h1:a=\n" +
		"github.com/redlimit/redlimitx v1.0.0 h1:e=\n"
	if got := string(withoutRoot([]byte(sum))); got != want {
		t.Errorf("withoutRoot:\n%s\nwant:\n%s", got, want)
	}
}

// The release reads its modules from go.work and its version from the
// CHANGELOG; both files are checked on a small repository.
func TestModulesAndChangelog(t *testing.T) {
	repo := t.TempDir()
	write := fileWriter(t, repo)
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./middleware/otel\n)\n")
	write("go.mod", "module github.com/redlimit/redlimit\n\ngo 1.26.0\n")
	write("middleware/otel/go.mod", "module github.com/redlimit/redlimit/middleware/otel\n\ngo 1.26.0\n\nrequire github.com/redlimit/redlimit v0.1.0\n")
	write("CHANGELOG.md", "# Changelog\n\n## v0.2.0 — unreleased\n\n## v0.1.0 — 2026-12-07\n")
	r := &release{repo: repo}
	mods, err := r.modules()
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) != 2 || mods[1].Tag("v0.2.0") != "middleware/otel/v0.2.0" || mods[0].Tag("v0.2.0") != "v0.2.0" || mods[1].Name != "otel" {
		t.Fatalf("modules = %+v", mods)
	}
	if v, err := r.changelogVersion(); err != nil || v != "v0.2.0" {
		t.Errorf("changelogVersion = %q, %v; want v0.2.0", v, err)
	}
	if err := r.checkChangelog("v0.2.0", false); err != nil {
		t.Errorf("checkChangelog(v0.2.0, undated): %v", err)
	}
	if err := r.checkChangelog("v0.2.0", true); err == nil {
		t.Error("checkChangelog(v0.2.0, dated) accepted a section marked unreleased")
	}
	if err := r.checkChangelog("v0.1.0", false); err == nil {
		t.Error("checkChangelog(v0.1.0) accepted a version that is not the newest section")
	}
	if err := r.checkLockstep("v0.1.0", mods); err != nil {
		t.Errorf("checkLockstep(v0.1.0): %v", err)
	}
	if err := r.checkLockstep("v0.2.0", mods); err == nil || !strings.Contains(err.Error(), "release-prepare") {
		t.Errorf("checkLockstep(v0.2.0) = %v, want the nested module's requirement named", err)
	}
	write("middleware/otel/go.mod", "module github.com/redlimit/redlimit/middleware/otel\n\ngo 1.26.0\n\nrequire github.com/redlimit/redlimit v0.1.0\n\nreplace github.com/redlimit/redlimit => ../..\n")
	if err := r.checkLockstep("v0.1.0", mods); err == nil || !strings.Contains(err.Error(), "replace") {
		t.Errorf("checkLockstep with a replace = %v, want it refused", err)
	}
}

// prepare points the nested modules and go.work at the next version, as
// make runs it: with GOWORK=off, under which go work edit alone finds no
// workspace (the first release-prepare failed so).
func TestPrepare(t *testing.T) {
	t.Setenv("GOWORK", "off")
	repo := t.TempDir()
	write := fileWriter(t, repo)
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./middleware/otel\n)\n\nreplace github.com/redlimit/redlimit v0.1.0 => ./\n")
	write("go.mod", "module github.com/redlimit/redlimit\n\ngo 1.26.0\n")
	write("middleware/otel/go.mod", "module github.com/redlimit/redlimit/middleware/otel\n\ngo 1.26.0\n\nrequire github.com/redlimit/redlimit v0.1.0\n")
	r := &release{repo: repo}
	if err := r.prepare("v0.2.0"); err != nil {
		t.Fatalf("prepare(v0.2.0): %v", err)
	}
	mods, err := r.modules()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.checkLockstep("v0.2.0", mods); err != nil {
		t.Errorf("after prepare, checkLockstep(v0.2.0): %v", err)
	}
	work, err := os.ReadFile(filepath.Join(repo, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(work), "github.com/redlimit/redlimit v0.2.0 => ./") || strings.Contains(string(work), "v0.1.0") {
		t.Errorf("go.work after prepare:\n%s\nwant the replace of v0.2.0 alone", work)
	}
}

// prepare also moves a module kept out of the workspace that requires the
// root at a release (peerbench), and leaves one on a placeholder alone.
func TestPrepareLocal(t *testing.T) {
	t.Setenv("GOWORK", "off")
	repo := t.TempDir()
	write := fileWriter(t, repo)
	write("go.work", "go 1.26.0\n\nuse .\n\nreplace github.com/redlimit/redlimit v0.1.0 => ./\n")
	write("go.mod", "module github.com/redlimit/redlimit\n\ngo 1.26.0\n")
	write("bench/peerbench/go.mod", "module github.com/redlimit/redlimit/bench/peerbench\n\ngo 1.26.0\n\nreplace github.com/redlimit/redlimit => ../..\n\nrequire github.com/redlimit/redlimit v0.1.0\n")
	placeholder := "module github.com/redlimit/redlimit/middleware/admin/browser\n\ngo 1.26.0\n\nreplace github.com/redlimit/redlimit => ../../..\n\nrequire github.com/redlimit/redlimit v0.0.0-00010101000000-000000000000\n"
	write("middleware/admin/browser/go.mod", placeholder)
	r := &release{repo: repo}
	if err := r.prepare("v0.2.0"); err != nil {
		t.Fatalf("prepare(v0.2.0): %v", err)
	}
	pb, err := os.ReadFile(filepath.Join(repo, "bench", "peerbench", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pb), "github.com/redlimit/redlimit v0.2.0") {
		t.Errorf("peerbench's go.mod after prepare:\n%s\nwant the root at v0.2.0", pb)
	}
	br, err := os.ReadFile(filepath.Join(repo, "middleware", "admin", "browser", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if string(br) != placeholder {
		t.Errorf("browser's go.mod changed:\n%s", br)
	}
}

// fileWriter returns a func writing a file of the small repository at
// repo, its directories made as needed.
func fileWriter(t *testing.T, repo string) func(name, data string) {
	return func(name, data string) {
		t.Helper()
		p := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
