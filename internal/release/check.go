package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// check is make release-check: the proof that version v of every module
// installs and works as a consumer gets it. Its last line is the summary.
func (r *release) check(v string, keep bool) error {
	mods, err := r.modules()
	if err != nil {
		return err
	}
	if err := r.checkChangelog(v, false); err != nil {
		return err
	}
	if err := r.checkLockstep(v, mods); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "redlimit-release-")
	if err != nil {
		return err
	}
	modcache := filepath.Join(tmp, "modcache")
	defer func() {
		if keep {
			fmt.Println("kept:", tmp)
			return
		}
		cleanModcache(modcache)
		os.RemoveAll(tmp)
	}()

	proxy := filepath.Join(tmp, "proxy")
	if err := r.buildProxy(proxy, v, mods); err != nil {
		return err
	}
	if err := r.checkZips(proxy, v, mods); err != nil {
		return err
	}
	fmt.Printf("proxy: %d module zips at %s, each with LICENSE and no replace\n", len(mods), v)

	env, err := consumerEnv(proxy, modcache)
	if err != nil {
		return err
	}
	var failed []string
	for _, m := range mods {
		line, err := consume(filepath.Join(tmp, "consumer", m.Name), env, m, v)
		if err != nil {
			failed = append(failed, m.Path)
			fmt.Printf("FAIL %s@%s: %v\n", m.Path, v, err)
			continue
		}
		fmt.Printf("installed %s@%s; its program: %s\n", m.Path, v, line)
	}

	prev, changes, err := r.apiDiff(v, mods)
	if err != nil {
		return err
	}
	incompatible, compatible := 0, 0
	for _, c := range changes {
		if c.Incompatible {
			incompatible++
			fmt.Println("incompatible:", c)
		} else {
			compatible++
		}
	}
	var problems []string
	if incompatible > 0 && !allowsIncompatible(prev, v) {
		problems = append(problems, fmt.Sprintf("%d incompatible API changes since %s need a new major version (a new minor one before v1.0.0), not %s", incompatible, prev, v))
	}

	passed, total, stateErr := r.stateCompat()
	if stateErr != nil {
		problems = append(problems, stateErr.Error())
	} else if passed != total || total == 0 {
		problems = append(problems, fmt.Sprintf("state across versions: %d of %d algorithms exact", passed, total))
	}
	if len(failed) > 0 {
		problems = append(problems, fmt.Sprintf("not installable at %s: %s", v, strings.Join(failed, ", ")))
	}
	for _, p := range problems {
		fmt.Println("FAIL", p)
	}
	fmt.Printf("release: %d modules installable at %s; API since %s: %d incompatible, %d compatible; state: %d of %d algorithms exact across versions\n",
		len(mods)-len(failed), v, prev, incompatible, compatible, passed, total)
	if len(problems) > 0 {
		return fmt.Errorf("%d problems", len(problems))
	}
	return nil
}

// cleanModcache removes a module cache (its files are read-only).
func cleanModcache(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	cmd := exec.Command("go", "clean", "-modcache")
	cmd.Env = append(os.Environ(), "GOMODCACHE="+dir, "GOWORK=off")
	cmd.Dir = filepath.Dir(dir)
	_ = cmd.Run()
}

// stateTest is the test that holds the state promise (docs/compatibility.md):
// one subtest per algorithm or feature, each deciding keys with the previous
// release's scripts and this one's, interleaved.
const (
	stateTest    = "TestStateAcrossReleases"
	statePackage = "./algorithms/redisstore/"
)

// stateCompat runs the state test and counts its top-level subtests.
func (r *release) stateCompat() (passed, total int, err error) {
	cmd := exec.Command("go", "test", "-count=1", "-json", "-run", "^"+stateTest+"$", statePackage)
	cmd.Dir = r.repo
	cmd.Env = append(os.Environ(), "GOWORK=off", "CI=true")
	out, runErr := cmd.Output()
	results := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		name, ok := strings.CutPrefix(ev.Test, stateTest+"/")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			results[name] = ev.Action
		case "run":
			if _, seen := results[name]; !seen {
				results[name] = "run"
			}
		}
	}
	var bad []string
	for name, res := range results {
		total++
		if res == "pass" {
			passed++
		} else {
			bad = append(bad, name+": "+res)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		fmt.Println("state across versions:", b)
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("%s in %s ran no subtest: %v\n%s", stateTest, statePackage, runErr, tail(out, 20))
	}
	return passed, total, nil
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var sectionRE = regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+)(.*)$`)

// changelogVersion returns the version of CHANGELOG.md's newest section.
func (r *release) changelogVersion() (string, error) {
	data, err := os.ReadFile(r.path("CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	m := sectionRE.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("CHANGELOG.md has no '## vX.Y.Z' section")
	}
	return string(m[1]), nil
}

// checkChangelog verifies that CHANGELOG.md has a section for v, the newest,
// and, for a release (dated), that it is no longer marked unreleased.
func (r *release) checkChangelog(v string, dated bool) error {
	data, err := os.ReadFile(r.path("CHANGELOG.md"))
	if err != nil {
		return err
	}
	all := sectionRE.FindAllSubmatch(data, -1)
	if len(all) == 0 || string(all[0][1]) != v {
		return fmt.Errorf("CHANGELOG.md's newest section is not %s: write what changed for a user first", v)
	}
	if dated && strings.Contains(string(all[0][2]), "unreleased") {
		return fmt.Errorf("CHANGELOG.md: %s is still marked unreleased: give it the release's date", v)
	}
	return nil
}
