package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tidy checks that every nested module's go.mod and go.sum are what
// `go mod tidy` writes for a consumer's view of it. go mod tidy ignores
// go.work, and the root module version a nested module requires is not
// published while it is being developed, so tidy runs on a copy of the
// module against the file proxy built from the working tree. The go.sum lines
// of the root module itself are left out of the comparison and of the
// committed go.sum: they hash the root module's zip, which changes with every
// commit to it, and the workspace does not read them.
func (r *release) tidy(write bool) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "redlimit-tidy-")
	if err != nil {
		return err
	}
	modcache := filepath.Join(tmp, "modcache")
	defer func() {
		cleanModcache(modcache)
		os.RemoveAll(tmp)
	}()
	stage := filepath.Join(tmp, "stage")
	if err := r.stage(stage); err != nil {
		return err
	}
	built := map[string]bool{}
	var problems []string
	for _, m := range mods[1:] {
		v, err := r.requiredRoot(m)
		if err != nil {
			return err
		}
		proxy := filepath.Join(tmp, "proxy")
		if v != "" && !built[v] {
			for _, root := range mods[:1] {
				if err := writeModule(proxy, stage, root, v); err != nil {
					return err
				}
			}
			built[v] = true
		}
		env, err := consumerEnv(proxy, modcache)
		if err != nil {
			return err
		}
		dir := filepath.Join(stage, filepath.FromSlash(m.Dir))
		if _, err := output(dir, env, "go", "mod", "tidy"); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
		for _, name := range []string{"go.mod", "go.sum"} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && !os.IsNotExist(err) {
				return err
			}
			if name == "go.sum" {
				got = withoutRoot(got)
			}
			file := r.path(filepath.FromSlash(m.Dir), name)
			have, err := os.ReadFile(file)
			if err != nil && !os.IsNotExist(err) {
				return err
			}
			if bytes.Equal(got, have) {
				continue
			}
			if write {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					return err
				}
				fmt.Printf("wrote %s/%s\n", m.Dir, name)
				continue
			}
			problems = append(problems, fmt.Sprintf("%s/%s is not tidy:\n%s", m.Dir, name, lineDiff(have, got)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s\n(make tidy-write rewrites them)", strings.Join(problems, "\n"))
	}
	return nil
}

// withoutRoot drops the go.sum lines of the root module and of this
// repository's other modules.
func withoutRoot(sum []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(sum), "\n") {
		if strings.HasPrefix(line, rootPath+" ") || strings.HasPrefix(line, rootPath+"/") {
			continue
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// lineDiff lists the lines only in have (-) and only in want (+).
func lineDiff(have, want []byte) string {
	count := func(b []byte) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			m[l]++
		}
		return m
	}
	h, w := count(have), count(want)
	var out []string
	for _, l := range strings.Split(string(have), "\n") {
		if w[l] == 0 && l != "" {
			out = append(out, "  - "+l)
		}
	}
	for _, l := range strings.Split(string(want), "\n") {
		if h[l] == 0 && l != "" {
			out = append(out, "  + "+l)
		}
	}
	if len(out) == 0 {
		return "  (the same lines, in another order or spacing)"
	}
	return strings.Join(out, "\n")
}
