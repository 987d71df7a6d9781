package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

const rootPath = "github.com/redlimit/redlimit"

// modEntry is one module of the repository that a consumer installs: the root
// module and every nested module go.work uses.
type modEntry struct {
	Dir  string // relative to the repository root, slash-separated; "." for the root
	Path string // the module path, from its go.mod
	Name string // a short name: the directory's last element, "redlimit" for the root
}

// Tag is the module's tag for version v: vX.Y.Z for the root, dir/vX.Y.Z for a
// nested module (the form the Go command maps to the module's version).
func (m modEntry) Tag(v string) string {
	if m.Dir == "." {
		return v
	}
	return m.Dir + "/" + v
}

// modules reads go.work: every module it uses is released, and nothing else
// (the benchmark harness, the admin page's browser test and this tool are
// modules of their own that nobody installs; they are outside the workspace).
func (r *release) modules() ([]modEntry, error) {
	data, err := os.ReadFile(r.path("go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []modEntry
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		gm, err := r.readGoMod(dir)
		if err != nil {
			return nil, err
		}
		name := path.Base(dir)
		if dir == "." {
			name = "redlimit"
		}
		mods = append(mods, modEntry{Dir: dir, Path: gm.Module.Mod.Path, Name: name})
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir < mods[j].Dir })
	if len(mods) == 0 || mods[0].Dir != "." || mods[0].Path != rootPath {
		return nil, fmt.Errorf("go.work must use the root module %s as \".\"", rootPath)
	}
	for _, m := range mods[1:] {
		if want := rootPath + "/" + m.Dir; m.Path != want {
			return nil, fmt.Errorf("%s/go.mod: module %s, want %s (a nested module's path is its directory under the root's)", m.Dir, m.Path, want)
		}
	}
	return mods, nil
}

func (r *release) readGoMod(dir string) (*modfile.File, error) {
	file := r.path(filepath.FromSlash(dir), "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(file, data, nil)
}

// requiredRoot returns the version of the root module that nested module m
// requires, or "" if it requires none.
func (r *release) requiredRoot(m modEntry) (string, error) {
	gm, err := r.readGoMod(m.Dir)
	if err != nil {
		return "", err
	}
	for _, req := range gm.Require {
		if req.Mod.Path == rootPath {
			return req.Mod.Version, nil
		}
	}
	return "", nil
}

// checkLockstep verifies what a release of version v needs of the go.mod files:
// no replace directive in any released module, and every nested module that
// requires the root module requires it at v (the modules are released
// together, so a nested module at v builds with the root at v alone).
func (r *release) checkLockstep(v string, mods []modEntry) error {
	var problems []string
	for _, m := range mods {
		gm, err := r.readGoMod(m.Dir)
		if err != nil {
			return err
		}
		for _, rep := range gm.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s: a consumer's go get ignores it", m.Dir, rep.Old.Path))
		}
		if m.Dir == "." {
			continue
		}
		got, err := r.requiredRoot(m)
		if err != nil {
			return err
		}
		if got != "" && got != v {
			problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, not %s (make release-prepare VERSION=%s)", m.Dir, rootPath, got, v, v))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("go.mod files not ready for %s:\n  %s", v, strings.Join(problems, "\n  "))
	}
	return nil
}

// prepare points every nested module's requirement on the root module, and
// go.work's replace of it, at version v: the first step towards releasing v
// (and the step after a release: the next version's number).
func (r *release) prepare(v string) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	for _, m := range mods[1:] {
		got, err := r.requiredRoot(m)
		if err != nil {
			return err
		}
		if got == "" || got == v {
			continue
		}
		if err := r.goCmd(m.Dir, nil, "mod", "edit", "-require="+rootPath+"@"+v); err != nil {
			return err
		}
		fmt.Printf("%s/go.mod: %s %s → %s\n", m.Dir, rootPath, got, v)
	}
	// the go.work file is named: make runs this tool with GOWORK=off,
	// under which go work edit finds no workspace of its own
	if err := r.prepareLocal(v, mods); err != nil {
		return err
	}
	data, err := os.ReadFile(r.path("go.work"))
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return err
	}
	for _, rep := range wf.Replace {
		if rep.Old.Path == rootPath && rep.Old.Version != v {
			if err := r.goCmd(".", nil, "work", "edit", "-dropreplace="+rootPath+"@"+rep.Old.Version, r.path("go.work")); err != nil {
				return err
			}
		}
	}
	if err := r.goCmd(".", nil, "work", "edit", "-replace="+rootPath+"@"+v+"=./", r.path("go.work")); err != nil {
		return err
	}
	fmt.Printf("go.work: replace %s %s => ./\n", rootPath, v)
	return nil
}

// prepareLocal moves the modules kept out of the workspace (peerbench,
// the browser tests: they build against the working tree through a
// replace of their own) that require the root module at a release to v
// too, so that go mod tidy leaves them as they are: they also require a
// nested module, which requires the root at v.
func (r *release) prepareLocal(v string, mods []modEntry) error {
	inWork := map[string]bool{}
	for _, m := range mods {
		inWork[filepath.Clean(r.path(filepath.FromSlash(m.Dir)))] = true
	}
	return filepath.WalkDir(r.repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != r.repo && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" || inWork[filepath.Dir(p)] {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		gm, err := modfile.Parse(p, data, nil)
		if err != nil {
			return err
		}
		for _, req := range gm.Require {
			if req.Mod.Path != rootPath || req.Mod.Version == v || module.IsPseudoVersion(req.Mod.Version) {
				continue
			}
			rel, _ := filepath.Rel(r.repo, filepath.Dir(p))
			if err := r.goCmd(filepath.ToSlash(rel), []string{"GOWORK=off"}, "mod", "edit", "-require="+rootPath+"@"+v); err != nil {
				return err
			}
			fmt.Printf("%s/go.mod: %s %s → %s\n", filepath.ToSlash(rel), rootPath, req.Mod.Version, v)
		}
		return nil
	})
}

// goCmd runs the go command in dir (relative to the repository) with extra
// environment, its output passed through.
func (r *release) goCmd(dir string, env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = r.path(filepath.FromSlash(dir))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: go %s: %w", dir, strings.Join(args, " "), err)
	}
	return nil
}

// output runs a command in dir (absolute) and returns its standard output.
func output(dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s (in %s): %w\n%s%s", name, strings.Join(args, " "), dir, err, out, stderr.Bytes())
	}
	return out, nil
}
