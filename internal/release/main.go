// Command release is the repository's release tooling: it builds the module
// zips a consumer would download, installs them as a consumer would, diffs
// the public API against the previous release, and prints or creates the
// tags of a release. It is a module of its own (its dependencies stay out of
// the library's go.mod) and is run by the Makefile:
//
//	make release-check [VERSION=vX.Y.Z]  # the proof, run by CI
//	make release VERSION=vX.Y.Z [CREATE=1]
//	make release-record VERSION=vX.Y.Z   # record a release: API listing, state fixture
//	make release-prepare VERSION=vX.Y.Z  # point the nested modules at the next version
//	make tidy                            # includes the nested modules' go.mod check
//
// docs/releasing.md is the procedure; docs/compatibility.md the promise.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage: release <command> [flags]

commands:
  check    -version V   build the module proxy, install and run every module as a consumer,
                        diff the API against the previous release, check state compatibility
  tags     -version V [-create]   print (or create) the tags of every module
  record   -version V   record release V: api/V.txt and the state fixture testdata/compat/V
  prepare  -version V   point the nested modules (and go.work) at root version V
  tidy     [-write]     check (or rewrite) every nested module's go.mod and go.sum
  proxy    -version V -out DIR    only build the file module proxy
  api      [-version V] [diff]    print the API listing, or its diff against the release before V
  version               print the version of CHANGELOG.md's newest section
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	repoFlag := fs.String("repo", "", "repository root (default: found from the working directory)")
	version := fs.String("version", "", "the version, vX.Y.Z (default: CHANGELOG.md's newest section)")
	out := fs.String("out", "", "proxy: the directory to write the proxy to")
	create := fs.Bool("create", false, "tags: create the tags (annotated, at HEAD) instead of printing them")
	keep := fs.Bool("keep", false, "check: keep the temporary proxy and consumers, and say where")
	write := fs.Bool("write", false, "tidy: rewrite the go.mod and go.sum files that are not tidy")
	if err := fs.Parse(args); err != nil {
		usage()
	}
	repo, err := findRepo(*repoFlag)
	if err != nil {
		fail(err)
	}
	r := &release{repo: repo}
	if *version == "" {
		v, err := r.changelogVersion()
		if err != nil {
			fail(err)
		}
		*version = v
	}
	if err := checkVersion(*version); err != nil {
		fail(err)
	}
	switch cmd {
	case "check":
		err = r.check(*version, *keep)
	case "tags":
		err = r.tags(*version, *create)
	case "record":
		err = r.record(*version)
	case "prepare":
		err = r.prepare(*version)
	case "tidy":
		err = r.tidy(*write)
	case "proxy":
		if *out == "" {
			fail(fmt.Errorf("proxy needs -out"))
		}
		var mods []modEntry
		mods, err = r.modules()
		if err == nil {
			err = r.buildProxy(*out, *version, mods)
		}
	case "api":
		err = r.printAPI(*version, fs.NArg() > 0 && fs.Arg(0) == "diff")
	case "version":
		fmt.Println(*version)
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

// findRepo returns the repository root: the flag, else the nearest directory
// upwards holding go.work.
func findRepo(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.work above the working directory: run from the repository or pass -repo")
		}
		dir = parent
	}
}

// release is the repository being released.
type release struct {
	repo string
}

func (r *release) path(rel ...string) string {
	return filepath.Join(append([]string{r.repo}, rel...)...)
}

func checkVersion(v string) error {
	if _, _, _, ok := parseSemver(v); !ok {
		return fmt.Errorf("version %q is not of the form vX.Y.Z", v)
	}
	return nil
}

// parseSemver parses vX.Y.Z (no pre-release or build suffix: releases only).
func parseSemver(v string) (major, minor, patch int, ok bool) {
	if !strings.HasPrefix(v, "v") {
		return 0, 0, 0, false
	}
	parts := strings.Split(v[1:], ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return 0, 0, 0, false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return 0, 0, 0, false
			}
			n[i] = n[i]*10 + int(c-'0')
		}
	}
	return n[0], n[1], n[2], true
}

// compareSemver orders two valid versions.
func compareSemver(a, b string) int {
	a1, a2, a3, _ := parseSemver(a)
	b1, b2, b3, _ := parseSemver(b)
	for _, d := range [][2]int{{a1, b1}, {a2, b2}, {a3, b3}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}
