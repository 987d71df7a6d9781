package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// fixtureDir holds, per release, the scripts that release ran
// (docs/scripts/ at that version): the previous releases' side of the state
// test (docs/compatibility.md, "State across versions").
const fixtureDir = "algorithms/redisstore/testdata/compat"

// record records release v in the repository: its API listing (api/v.txt,
// the base of the next release's API diff) and its scripts (the state
// fixture). Run it in the release's commit.
func (r *release) record(v string) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	features, err := r.apiFeatures(mods)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.path("api"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(r.apiFile(v), formatAPI(features), 0o644); err != nil {
		return err
	}
	fmt.Printf("api/%s.txt: %d features\n", v, len(features))
	dst := r.path(filepath.FromSlash(fixtureDir), v, "scripts")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	scripts, err := filepath.Glob(r.path("docs", "scripts", "*.lua"))
	if err != nil {
		return err
	}
	for _, s := range scripts {
		data, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(s)), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("%s/%s/scripts: %d scripts\n", fixtureDir, v, len(scripts))
	return nil
}

// tags prints the tags of release v, one per module, or creates them
// (annotated, at HEAD) after checking that v is ready: its CHANGELOG section
// dated, its API and scripts recorded and current, the go.mod files in
// lockstep, the working tree clean.
func (r *release) tags(v string, create bool) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	var problems []string
	if err := r.checkChangelog(v, true); err != nil {
		problems = append(problems, err.Error())
	}
	if err := r.checkLockstep(v, mods); err != nil {
		problems = append(problems, err.Error())
	}
	if recorded, err := os.ReadFile(r.apiFile(v)); err != nil {
		problems = append(problems, fmt.Sprintf("api/%s.txt: %v (make release-record VERSION=%s)", v, err, v))
	} else if features, err := r.apiFeatures(mods); err != nil {
		return err
	} else if !bytes.Equal(recorded, formatAPI(features)) {
		problems = append(problems, fmt.Sprintf("api/%s.txt differs from the tree's API (make release-record VERSION=%s)", v, v))
	}
	if err := r.sameScripts(v); err != nil {
		problems = append(problems, err.Error())
	}
	if st, err := output(r.repo, nil, "git", "status", "--porcelain"); err != nil {
		return err
	} else if create && len(bytes.TrimSpace(st)) > 0 {
		problems = append(problems, "the working tree has uncommitted changes: a tag names a commit")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s is not ready:\n  %s", v, strings.Join(problems, "\n  "))
	}
	for _, m := range mods {
		tag := m.Tag(v)
		msg := "redlimit " + tag
		if !create {
			fmt.Printf("git tag -a %s -m %q\n", tag, msg)
			continue
		}
		cmd := exec.Command("git", "tag", "-a", tag, "-m", msg)
		cmd.Dir = r.repo
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("git tag %s: %w", tag, err)
		}
		fmt.Println("tagged", tag)
	}
	if !create {
		fmt.Printf("(make release VERSION=%s CREATE=1 creates them; then git push origin %s)\n", v, strings.Join(tagList(mods, v), " "))
	}
	return nil
}

func tagList(mods []modEntry, v string) []string {
	var tags []string
	for _, m := range mods {
		tags = append(tags, m.Tag(v))
	}
	return tags
}

// sameScripts verifies that release v's state fixture is docs/scripts.
func (r *release) sameScripts(v string) error {
	scripts, err := filepath.Glob(r.path("docs", "scripts", "*.lua"))
	if err != nil {
		return err
	}
	dir := r.path(filepath.FromSlash(fixtureDir), v, "scripts")
	fixture, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	if len(fixture) != len(scripts) {
		return fmt.Errorf("%s/%s/scripts holds %d scripts, docs/scripts %d (make release-record VERSION=%s)", fixtureDir, v, len(fixture), len(scripts), v)
	}
	for _, s := range scripts {
		a, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.Base(s)))
		if err != nil || !bytes.Equal(a, b) {
			return fmt.Errorf("%s/%s/scripts/%s differs from docs/scripts (make release-record VERSION=%s)", fixtureDir, v, filepath.Base(s), v)
		}
	}
	return nil
}
